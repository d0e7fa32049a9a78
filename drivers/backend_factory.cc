#include "drivers/backend_factory.h"

#include "drivers/collectives/collective_probe.h"

#include <unistd.h>

#include <map>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "drivers/cndev/cndev_backend.h"
#include "drivers/fingerprint/fingerprint.h"
#include "drivers/levelzero/levelzero_backend.h"
#include "drivers/mxsml/mxsml_backend.h"
#include "drivers/nvml/nvml_backend.h"
#include "drivers/sim/sim_backend.h"
#include "drivers/sysfs/sysfs_pci.h"

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

template <typename Backend>
absl::StatusOr<std::unique_ptr<DeviceBackend>> Load(const std::vector<std::string>& candidates) {
  auto backend = Backend::Load(candidates);
  if (!backend.ok()) return backend.status();
  return std::unique_ptr<DeviceBackend>(*std::move(backend));
}

// The vendor backends `auto` tries, in order: name, vendor (for log lines), library, extra
// directories the vendor installs it in, and the loader.
struct VendorBackend {
  absl::string_view name;
  absl::string_view vendor;
  const char* library;
  std::vector<std::string> extra_dirs;
  absl::StatusOr<std::unique_ptr<DeviceBackend>> (*load)(const std::vector<std::string>&);
};

const std::vector<VendorBackend>& VendorBackends() {
  static const std::vector<VendorBackend> kBackends = {
      {"nvml", "NVIDIA", "libnvidia-ml.so.1", {}, &Load<NvmlBackend>},
      {"cndev", "Cambricon", "libcndev.so", {"/usr/local/neuware/lib64"}, &Load<CndevBackend>},
      {"mxsml", "MetaX", "libmxsml.so", {"/opt/mxdriver/lib", "/opt/maca/lib"}, &Load<MxsmlBackend>},
      {"levelzero", "Intel", "libze_loader.so.1", {}, &Load<LevelZeroBackend>},
  };
  return kBackends;
}

const VendorBackend* FindVendorBackend(const std::string& name) {
  for (const auto& b : VendorBackends()) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<std::vector<std::unique_ptr<DeviceBackend>>> CreateBackends(const BackendOptions& options) {
  std::vector<std::string> names;
  for (const auto& name : options.names) {
    if (name == "auto") {
      for (const auto& b : VendorBackends()) names.emplace_back(b.name);
    } else {
      names.push_back(name);
    }
  }
  std::vector<std::unique_ptr<DeviceBackend>> backends;
  std::set<std::string> seen;
  for (const auto& name : names) {
    if (!seen.insert(name).second) continue;
    if (name == "sim") {
      if (options.sim_inventory_path.empty()) return absl::InvalidArgumentError("--backend sim needs --inventory FILE");
      backends.push_back(std::make_unique<SimBackend>(options.sim_inventory_path));
    } else if (name == "sysfs") {
      backends.push_back(std::make_unique<SysfsBackend>(SysfsPci(options.sysfs_root, options.pci_ids_path)));
    } else if (const VendorBackend* vendor = FindVendorBackend(name)) {
      auto backend = vendor->load(LibraryCandidates(vendor->library, vendor->extra_dirs));
      if (backend.ok()) {
        backends.push_back(*std::move(backend));
      } else if (absl::IsNotFound(backend.status())) {
        options.note(absl::StrCat("no ", vendor->vendor, " devices: ", backend.status().message()));
      } else {
        options.note(absl::StrCat(name, " backend disabled: ", backend.status().message()));
      }
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown backend '", name, "' (auto, nvml, cndev, mxsml, levelzero, sysfs, sim)"));
    }
  }
  return backends;
}

absl::StatusOr<NodeInventory> CollectInventory(const std::vector<std::unique_ptr<DeviceBackend>>& backends,
                                               const CollectOptions& options) {
  NodeInventory inventory;
  inventory.hostname = HostName();
  inventory.cpus = static_cast<int>(std::thread::hardware_concurrency());
  inventory.memory_mib = HostMemoryMib();
  std::vector<std::string> names;
  std::set<std::string> ids, buses;
  for (const auto& backend : backends) {
    names.emplace_back(backend->Name());
    if (auto* sim = dynamic_cast<SimBackend*>(backend.get())) {
      // A simulated node describes its own host size (so a test box can pose as an 8-card server).
      auto sim_inventory = sim->ReadInventory();
      if (!sim_inventory.ok()) return sim_inventory.status();
      if (sim_inventory->cpus > 0) inventory.cpus = sim_inventory->cpus;
      if (sim_inventory->memory_mib > 0) inventory.memory_mib = sim_inventory->memory_mib;
      if (!sim_inventory->hostname.empty()) inventory.hostname = sim_inventory->hostname;
      inventory.collectives.insert(sim_inventory->collectives.begin(), sim_inventory->collectives.end());
    }
    inventory.simulated = inventory.simulated || backend->Simulated();
    auto devices = backend->Discover();
    if (!devices.ok()) {
      return absl::Status(devices.status().code(), absl::StrCat(backend->Name(), ": ", devices.status().message()));
    }
    for (auto& d : *devices) {
      // sysfs sees every card a vendor library already reported: keep the vendor's record.
      if (backend->Name() == "sysfs" && buses.contains(d.pci_bus_id)) continue;
      if (!ids.insert(d.id).second) {
        return absl::InvalidArgumentError(absl::StrCat("device id '", d.id, "' reported by two backends"));
      }
      if (!d.pci_bus_id.empty()) buses.insert(d.pci_bus_id);
      inventory.devices.push_back(std::move(d));
    }
  }
  inventory.backend = absl::StrJoin(names, ",");
  if (!inventory.simulated) SysfsPci(options.sysfs_root).Complete(inventory.devices);
  static const SpecTable kDefaults = SpecTable::Defaults();  // built once, not on every refresh
  const SpecTable& specs = options.specs ? *options.specs : kDefaults;
  for (auto& d : inventory.devices) ApplyFingerprint(specs, d);
  inventory.torch_devices =
      options.torch_devices.empty() ? DefaultTorchDevices(inventory.devices) : options.torch_devices;
  if (options.probe_collectives) {
    const std::set<std::string> found = DiscoverCollectives(options.note);
    inventory.collectives.insert(found.begin(), found.end());
  }
  return inventory;
}

std::set<std::string> DefaultTorchDevices(const std::vector<DeviceRecord>& devices) {
  std::set<std::string> out = {"cpu"};
  for (const auto& d : devices) out.insert(std::string(RuntimeOf(d.vendor).torch_device));
  return out;
}

}  // namespace hetpool::drivers
