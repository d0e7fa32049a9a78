// Builds the node's inventory from the configured discovery backends.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "drivers/device_backend.h"

namespace hetpool::drivers {

struct BackendOptions {
  std::vector<std::string> names;  // e.g. {"sim"}
  std::string sim_inventory_path;  // for "sim"
};

absl::StatusOr<std::vector<std::unique_ptr<DeviceBackend>>> CreateBackends(
    const BackendOptions& options);

// Asks every backend for its devices and merges them; host facts (cpus, memory) come from the sim
// inventory when one is used, else from the running machine.
absl::StatusOr<NodeInventory> CollectInventory(
    const std::vector<std::unique_ptr<DeviceBackend>>& backends);

}  // namespace hetpool::drivers
