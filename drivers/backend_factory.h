// Builds the node's discovery backends and turns their answers into one NodeInventory: vendor
// libraries first, sysfs to complete PCIe/NUMA facts, then fingerprints from the spec table.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "drivers/device_backend.h"
#include "drivers/fingerprint/spec_table.h"

namespace hetpool::drivers {

struct BackendOptions {
  // Backend names; "auto" = every vendor backend whose library loads (plus sysfs completion).
  std::vector<std::string> names = {"auto"};
  std::string sim_inventory_path;  // for "sim"
  std::string sysfs_root = "/sys";
  std::string pci_ids_path;  // default: pciutils' pci.ids
  // One line per backend that found nothing or could not be used (the caller logs them).
  std::function<void(const std::string&)> note = [](const std::string&) {};
};

// INVALID_ARGUMENT only for an unknown name or a sim backend without inventory. A vendor library
// that is absent, incomplete or fails to initialise is reported through options.note and left
// out: that backend only, never the agent.
absl::StatusOr<std::vector<std::unique_ptr<DeviceBackend>>> CreateBackends(const BackendOptions& options);

struct CollectOptions {
  std::string sysfs_root = "/sys";
  const SpecTable* specs = nullptr;              // defaults when null
  std::set<std::string> torch_devices;           // empty: cpu + the torch device of each vendor found
  bool probe_collectives = true;                 // look for libflagcx.so (collective_probe.h)
  std::function<void(const std::string&)> note;  // why a collective library that loads is not used
};

// cpu plus the torch device of every vendor present: what a node is assumed to run when nobody
// said otherwise (the agent's --torch-devices overrides it).
std::set<std::string> DefaultTorchDevices(const std::vector<DeviceRecord>& devices);

// Asks every backend and merges the answers. A backend whose discovery fails as a whole is
// reported in the error (the caller keeps the previous inventory).
absl::StatusOr<NodeInventory> CollectInventory(const std::vector<std::unique_ptr<DeviceBackend>>& backends,
                                               const CollectOptions& options = {});

}  // namespace hetpool::drivers
