#include "drivers/levelzero/levelzero_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "drivers/device_links.h"
#include "drivers/health_signals.h"
#include "drivers/vendor_c_abi.h"

namespace hetpool::drivers {
namespace {

std::string ResultName(ze_result_t rc) {
  switch (rc) {
    case ZE_RESULT_SUCCESS: return "ZE_RESULT_SUCCESS";
    case ZE_RESULT_ERROR_DEVICE_LOST: return "ZE_RESULT_ERROR_DEVICE_LOST";
    case ZE_RESULT_ERROR_UNINITIALIZED: return "ZE_RESULT_ERROR_UNINITIALIZED";
    case ZE_RESULT_ERROR_UNSUPPORTED_FEATURE: return "ZE_RESULT_ERROR_UNSUPPORTED_FEATURE";
    case ZE_RESULT_ERROR_INVALID_ARGUMENT: return "ZE_RESULT_ERROR_INVALID_ARGUMENT";
    default: return absl::StrFormat("ze_result_t 0x%x", static_cast<unsigned>(rc));
  }
}

std::string UuidString(const ze_device_uuid_t& uuid) {
  std::string out;
  for (int i = 0; i < ZE_MAX_DEVICE_UUID_SIZE; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    absl::StrAppendFormat(&out, "%02x", uuid.id[i]);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LevelZeroBackend>> LevelZeroBackend::Load(const std::vector<std::string>& candidates) {
  auto loaded = OpenVendorLibrary<EntryPoints>(candidates, [](const DynamicLibrary& lib, EntryPoints& t) {
    HETPOOL_L0_REQUIRED(HETPOOL_REQUIRE_ENTRY_POINT)
    HETPOOL_L0_OPTIONAL(HETPOOL_OPTIONAL_ENTRY_POINT)
    return absl::OkStatus();
  });
  if (!loaded.ok()) return loaded.status();
  auto& [library, t] = *loaded;
  ze_result_t rc;
  if (t.zesInit && t.zesDriverGet && t.zesDeviceGet) {
    rc = t.zesInit(0);
  } else {
    // Spec 1.4: Sysman is enabled for the process by this variable before zeInit. It only adds
    // Sysman to the handles; jobs started later get their own environment.
    setenv("ZES_ENABLE_SYSMAN", "1", /*overwrite=*/0);
    rc = t.zeInit(ZE_INIT_FLAG_GPU_ONLY);
  }
  if (rc != ZE_RESULT_SUCCESS) return absl::UnavailableError(absl::StrCat("Level Zero init: ", ResultName(rc)));
  return std::unique_ptr<LevelZeroBackend>(new LevelZeroBackend(std::move(library), t));
}

absl::StatusOr<std::vector<zes_device_handle_t>> LevelZeroBackend::Devices() {
  std::vector<zes_device_handle_t> devices;
  uint32_t drivers = 0;
  const bool sysman_only = ze_.zesInit && ze_.zesDriverGet && ze_.zesDeviceGet;
  ze_result_t rc = sysman_only ? ze_.zesDriverGet(&drivers, nullptr) : ze_.zeDriverGet(&drivers, nullptr);
  if (rc != ZE_RESULT_SUCCESS) return absl::UnavailableError(absl::StrCat("driver count: ", ResultName(rc)));
  std::vector<void*> handles(drivers);
  rc = sysman_only ? ze_.zesDriverGet(&drivers, handles.data())
                   : ze_.zeDriverGet(&drivers, reinterpret_cast<ze_driver_handle_t*>(handles.data()));
  if (rc != ZE_RESULT_SUCCESS) return absl::UnavailableError(absl::StrCat("drivers: ", ResultName(rc)));
  for (void* driver : handles) {
    uint32_t count = 0;
    auto get = [&](uint32_t* n, zes_device_handle_t* out) {
      return sysman_only ? ze_.zesDeviceGet(driver, n, out)
                         : ze_.zeDeviceGet(static_cast<ze_driver_handle_t>(driver), n,
                                           reinterpret_cast<ze_device_handle_t*>(out));
    };
    if ((rc = get(&count, nullptr)) != ZE_RESULT_SUCCESS) {
      return absl::UnavailableError(absl::StrCat("device count: ", ResultName(rc)));
    }
    std::vector<zes_device_handle_t> list(count);
    if ((rc = get(&count, list.data())) != ZE_RESULT_SUCCESS) {
      return absl::UnavailableError(absl::StrCat("devices: ", ResultName(rc)));
    }
    devices.insert(devices.end(), list.begin(), list.begin() + count);
  }
  return devices;
}

std::vector<CardProcess> LevelZeroBackend::Processes(zes_device_handle_t handle) const {
  zes_process_state_t blank{};
  blank.stype = ZES_STRUCTURE_TYPE_PROCESS_STATE;
  const auto states = ReadVendorList(blank, [&](uint32_t* count, zes_process_state_t* buffer) {
    const ze_result_t rc = ze_.zesDeviceProcessesGetState(handle, count, buffer);
    if (rc == ZE_RESULT_ERROR_INVALID_SIZE) return VendorListRead::kTooSmall;
    return rc == ZE_RESULT_SUCCESS ? VendorListRead::kDone : VendorListRead::kFailed;
  });
  std::vector<CardProcess> out;
  for (const auto& state : states) out.push_back({static_cast<int>(state.processId), state.memSize >> 20, ""});
  return out;
}

void LevelZeroBackend::AddHealthSignals(zes_device_handle_t h, zes_mem_health_t memory,
                                        const zes_pci_speed_t& max_speed, DeviceRecord& d) const {
  auto add = [&d](Severity severity, std::string what) {
    d.signals.push_back({severity, std::move(what), "levelzero"});
  };
  zes_device_state_t state{};
  state.stype = ZES_STRUCTURE_TYPE_DEVICE_STATE;
  if (ze_.zesDeviceGetState && ze_.zesDeviceGetState(h, &state) == ZE_RESULT_SUCCESS) {
    if (state.reset & ZES_RESET_REASON_FLAG_WEDGED) add(Severity::kFatal, "reset required: the hardware is wedged");
    if (state.reset & ZES_RESET_REASON_FLAG_REPAIR) add(Severity::kDegraded, "reset required to complete a repair");
  }
  if (memory == ZES_MEM_HEALTH_REPLACE) add(Severity::kFatal, "memory: replace the card (uncorrectable errors)");
  if (memory == ZES_MEM_HEALTH_CRITICAL) add(Severity::kDegraded, "memory: running on reduced memory");
  if (memory == ZES_MEM_HEALTH_DEGRADED) add(Severity::kDegraded, "memory: excessive correctable errors");
  // Uncorrectable errors of the hardware's making: programming errors are the application's,
  // engine resets and display errors say nothing of a compute card's memory or engines.
  uint32_t sets = 0;
  if (ze_.zesDeviceEnumRasErrorSets && ze_.zesRasGetProperties && ze_.zesRasGetState &&
      ze_.zesDeviceEnumRasErrorSets(h, &sets, nullptr) == ZE_RESULT_SUCCESS) {
    std::vector<zes_ras_handle_t> handles(sets);
    if (ze_.zesDeviceEnumRasErrorSets(h, &sets, handles.data()) != ZE_RESULT_SUCCESS) sets = 0;
    uint64_t uncorrected = 0;
    for (uint32_t i = 0; i < sets && i < handles.size(); ++i) {
      zes_ras_properties_t props{};
      props.stype = ZES_STRUCTURE_TYPE_RAS_PROPERTIES;
      zes_ras_state_t ras{};
      ras.stype = ZES_STRUCTURE_TYPE_RAS_STATE;
      if (ze_.zesRasGetProperties(handles[i], &props) != ZE_RESULT_SUCCESS ||
          props.type != ZES_RAS_ERROR_TYPE_UNCORRECTABLE ||
          ze_.zesRasGetState(handles[i], /*clear=*/0, &ras) != ZE_RESULT_SUCCESS) {
        continue;
      }
      for (int c : {ZES_RAS_ERROR_CAT_DRIVER_ERRORS, ZES_RAS_ERROR_CAT_COMPUTE_ERRORS,
                    ZES_RAS_ERROR_CAT_NON_COMPUTE_ERRORS, ZES_RAS_ERROR_CAT_CACHE_ERRORS}) {
        uncorrected += ras.category[c];
      }
    }
    if (uncorrected > 0) add(Severity::kFatal, absl::StrCat(uncorrected, " uncorrectable RAS error(s)"));
  }
  zes_pci_state_t pci{};
  pci.stype = ZES_STRUCTURE_TYPE_PCI_STATE;
  if (ze_.zesDevicePciGetState && ze_.zesDevicePciGetState(h, &pci) == ZE_RESULT_SUCCESS) {
    const PcieLinkHealth link{pci.speed.width, max_speed.width, pci.speed.gen, max_speed.gen};
    if (auto s = SignalOfPcieLink(link, "levelzero")) d.signals.push_back(std::move(*s));
  }
  MarkUnhealthyOnFatal(d);
}

absl::StatusOr<std::vector<DeviceRecord>> LevelZeroBackend::Discover() {
  auto handles = Devices();
  if (!handles.ok()) return handles.status();
  std::vector<DeviceRecord> devices;
  std::map<uint32_t, size_t> by_fabric_id;
  for (size_t i = 0; i < handles->size(); ++i) {
    zes_device_handle_t h = (*handles)[i];
    DeviceRecord d;
    d.vendor = Vendor::kIntel;
    d.index = static_cast<int>(i);
    d.id = absl::StrCat("intel", i);
    auto fail = [&d](const char* call, ze_result_t rc) {
      if (d.healthy) d.health_message = absl::StrCat(call, ": ", ResultName(rc));
      d.healthy = false;
    };
    zes_device_properties_t props{};
    props.stype = ZES_STRUCTURE_TYPE_DEVICE_PROPERTIES;
    if (ze_result_t rc = ze_.zesDeviceGetProperties(h, &props); rc == ZE_RESULT_SUCCESS) {
      d.model = Bounded(props.modelName, sizeof(props.modelName));
      if (d.model.empty()) d.model = Bounded(props.core.name, sizeof(props.core.name));
      d.serial = Bounded(props.serialNumber, sizeof(props.serialNumber));
      d.driver_version = Bounded(props.driverVersion, sizeof(props.driverVersion));
      d.uuid = UuidString(props.core.uuid);
    } else {
      fail("zesDeviceGetProperties", rc);
    }
    uint32_t modules = 0;
    zes_mem_health_t worst_memory = ZES_MEM_HEALTH_UNKNOWN;
    if (ze_result_t rc = ze_.zesDeviceEnumMemoryModules(h, &modules, nullptr); rc == ZE_RESULT_SUCCESS) {
      std::vector<zes_mem_handle_t> mems(modules);
      ze_.zesDeviceEnumMemoryModules(h, &modules, mems.data());
      for (auto mem : mems) {
        zes_mem_state_t state{};
        state.stype = ZES_STRUCTURE_TYPE_MEM_STATE;
        if (ze_result_t mrc = ze_.zesMemoryGetState(mem, &state); mrc == ZE_RESULT_SUCCESS) {
          d.memory_mib += state.size >> 20;
          d.memory_used_mib += (state.size - state.free) >> 20;
          worst_memory = std::max(worst_memory, state.health);
        } else {
          fail("zesMemoryGetState", mrc);
        }
      }
    } else {
      fail("zesDeviceEnumMemoryModules", rc);
    }
    zes_pci_properties_t pci{};
    pci.stype = ZES_STRUCTURE_TYPE_PCI_PROPERTIES;
    if (ze_result_t rc = ze_.zesDevicePciGetProperties(h, &pci); rc == ZE_RESULT_SUCCESS) {
      d.pci_bus_id = FormatBusId(pci.address.domain, pci.address.bus, pci.address.device, pci.address.function);
    } else {
      fail("zesDevicePciGetProperties", rc);
    }
    if (ze_.zesDeviceProcessesGetState) d.processes = Processes(h);
    AddHealthSignals(h, worst_memory, pci.maxSpeed, d);
    devices.push_back(std::move(d));
  }

  // Xe Link: every port knows its own fabric id and the remote port's; match them up.
  if (ze_.zesDeviceEnumFabricPorts && ze_.zesFabricPortGetProperties && ze_.zesFabricPortGetState) {
    std::vector<std::vector<zes_fabric_port_handle_t>> ports(devices.size());
    for (size_t i = 0; i < devices.size(); ++i) {
      if (!devices[i].healthy) continue;
      uint32_t n = 0;
      if (ze_.zesDeviceEnumFabricPorts((*handles)[i], &n, nullptr) != ZE_RESULT_SUCCESS) continue;
      ports[i].resize(n);
      ze_.zesDeviceEnumFabricPorts((*handles)[i], &n, ports[i].data());
      for (auto port : ports[i]) {
        zes_fabric_port_properties_t props{};
        props.stype = ZES_STRUCTURE_TYPE_FABRIC_PORT_PROPERTIES;
        if (ze_.zesFabricPortGetProperties(port, &props) == ZE_RESULT_SUCCESS) by_fabric_id[props.portId.fabricId] = i;
      }
    }
    for (size_t i = 0; i < devices.size(); ++i) {
      for (auto port : ports[i]) {
        zes_fabric_port_state_t state{};
        state.stype = ZES_STRUCTURE_TYPE_FABRIC_PORT_STATE;
        if (ze_.zesFabricPortGetState(port, &state) != ZE_RESULT_SUCCESS ||
            state.status != ZES_FABRIC_PORT_STATUS_HEALTHY) {
          continue;
        }
        auto peer = by_fabric_id.find(state.remotePortId.fabricId);
        if (peer != by_fabric_id.end() && peer->second != i) {
          AddFabricLane(devices[i], devices[peer->second].id, LinkKind::kXeLink);
        }
      }
    }
  }
  // Sysman has no PCIe distance between devices: the sysfs pass fills those links in.
  return devices;
}

}  // namespace hetpool::drivers
