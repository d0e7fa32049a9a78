#include "drivers/backend_factory.h"

#include <unistd.h>

#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "drivers/sim/sim_backend.h"

namespace hetpool::drivers {
namespace {

uint64_t HostMemoryMib() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size) / (1024 * 1024);
}

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<DeviceBackend>>> CreateBackends(
    const BackendOptions& options) {
  std::vector<std::unique_ptr<DeviceBackend>> backends;
  for (const auto& name : options.names) {
    if (name == "sim") {
      if (options.sim_inventory_path.empty()) {
        return absl::InvalidArgumentError("--backend sim needs --inventory FILE");
      }
      backends.push_back(std::make_unique<SimBackend>(options.sim_inventory_path));
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown backend '", name, "' (available in this build: sim)"));
    }
  }
  if (backends.empty()) return absl::InvalidArgumentError("no discovery backend configured");
  return backends;
}

absl::StatusOr<NodeInventory> CollectInventory(
    const std::vector<std::unique_ptr<DeviceBackend>>& backends) {
  NodeInventory inventory;
  inventory.hostname = HostName();
  inventory.cpus = static_cast<int>(std::thread::hardware_concurrency());
  inventory.memory_mib = HostMemoryMib();
  inventory.simulated = false;
  std::vector<std::string> names;
  std::set<std::string> ids;
  for (const auto& backend : backends) {
    names.emplace_back(backend->Name());
    if (auto* sim = dynamic_cast<SimBackend*>(backend.get())) {
      // A simulated node describes its own host size (so a test box can pose as an 8-card server).
      auto sim_inventory = sim->ReadInventory();
      if (!sim_inventory.ok()) return sim_inventory.status();
      if (sim_inventory->cpus > 0) inventory.cpus = sim_inventory->cpus;
      if (sim_inventory->memory_mib > 0) inventory.memory_mib = sim_inventory->memory_mib;
      if (!sim_inventory->hostname.empty()) inventory.hostname = sim_inventory->hostname;
    }
    inventory.simulated = inventory.simulated || backend->Simulated();
    auto devices = backend->Discover();
    if (!devices.ok()) {
      return absl::Status(devices.status().code(),
                          absl::StrCat(backend->Name(), ": ", devices.status().message()));
    }
    for (auto& d : *devices) {
      if (!ids.insert(d.id).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("device id '", d.id, "' reported by two backends"));
      }
      inventory.devices.push_back(std::move(d));
    }
  }
  inventory.backend = absl::StrJoin(names, ",");
  return inventory;
}

}  // namespace hetpool::drivers
