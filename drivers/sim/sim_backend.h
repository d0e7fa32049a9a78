// The `sim` backend: devices described by a JSON inventory file (drivers/inventory_json.h).
// The file is re-read on every Discover() so tests can change health or remove a card live.
#pragma once

#include <string>

#include "drivers/device_backend.h"

namespace hetpool::drivers {

class SimBackend : public DeviceBackend {
 public:
  explicit SimBackend(std::string inventory_path) : path_(std::move(inventory_path)) {}
  absl::string_view Name() const override { return "sim"; }
  bool Simulated() const override { return true; }
  absl::StatusOr<std::vector<DeviceRecord>> Discover() override;

  // The node-level fields (cpus, memory) of the inventory file.
  absl::StatusOr<NodeInventory> ReadInventory() const;

 private:
  std::string path_;
};

}  // namespace hetpool::drivers
