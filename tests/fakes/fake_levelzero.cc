// A fake libze_loader.so.1: the Level Zero 1.4 calls of drivers/levelzero/levelzero_abi.h (types
// from Debian's libze-dev headers) over a JSON fixture. Device i's Xe Link fabric id is 0x1000+i.
#include <cstdio>
#include <cstring>

#include "drivers/levelzero/levelzero_abi.h"
#include "tests/fakes/fake_fixture.h"

using hetpool::fakes::FakeDevice;
using hetpool::fakes::Fixture;

namespace {

bool g_initialized = false;
int g_driver_tag = 0;  // the one driver handle points here

template <typename Handle>
Handle Encode(intptr_t value) {
  return reinterpret_cast<Handle>(value + 1);
}
template <typename Handle>
intptr_t Decode(Handle h) {
  return reinterpret_cast<intptr_t>(h) - 1;
}

ze_result_t Check(zes_device_handle_t h, FakeDevice** out, int* index = nullptr) {
  if (!g_initialized) return ZE_RESULT_ERROR_UNINITIALIZED;
  if (int rc = hetpool::fakes::TakeInjectedError()) return static_cast<ze_result_t>(rc);
  const intptr_t i = Decode(h);
  auto* f = Fixture();
  if (i < 0 || i >= static_cast<intptr_t>(f->devices.size())) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  if (f->devices[i].removed) return ZE_RESULT_ERROR_DEVICE_LOST;
  *out = &f->devices[i];
  if (index) *index = static_cast<int>(i);
  return ZE_RESULT_SUCCESS;
}

// Port handle = (device << 8 | lane).
int LaneCount(const FakeDevice& d) {
  int n = 0;
  for (const auto& l : d.links) n += l.lanes;
  return n;
}
int LanePeer(const FakeDevice& d, int lane) {
  for (const auto& l : d.links) {
    if (lane < l.lanes) return l.peer;
    lane -= l.lanes;
  }
  return -1;
}

}  // namespace

extern "C" {

ze_result_t zeInit(ze_init_flags_t) {
  if (hetpool::fakes::FixtureFor("intel") == nullptr) return ZE_RESULT_ERROR_UNINITIALIZED;
  const char* sysman = std::getenv("ZES_ENABLE_SYSMAN");
  if (sysman == nullptr || std::strcmp(sysman, "1") != 0)
    return ZE_RESULT_ERROR_UNINITIALIZED;  // as 1.4 would for zes*
  g_initialized = true;
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeDriverGet(uint32_t* count, ze_driver_handle_t* drivers) {
  if (!g_initialized) return ZE_RESULT_ERROR_UNINITIALIZED;
  if (drivers != nullptr && *count >= 1) drivers[0] = reinterpret_cast<ze_driver_handle_t>(&g_driver_tag);
  *count = 1;
  return ZE_RESULT_SUCCESS;
}

ze_result_t zeDeviceGet(ze_driver_handle_t, uint32_t* count, ze_device_handle_t* devices) {
  if (!g_initialized) return ZE_RESULT_ERROR_UNINITIALIZED;
  if (int rc = hetpool::fakes::TakeInjectedError()) return static_cast<ze_result_t>(rc);
  auto visible = hetpool::fakes::VisibleDevices();
  if (devices != nullptr) {
    for (uint32_t i = 0; i < *count && i < visible.size(); ++i) devices[i] = Encode<ze_device_handle_t>(visible[i]);
  }
  *count = static_cast<uint32_t>(visible.size());
  return ZE_RESULT_SUCCESS;
}

ze_result_t zesDeviceGetProperties(zes_device_handle_t h, zes_device_properties_t* props) {
  FakeDevice* d = nullptr;
  int index = 0;
  if (ze_result_t rc = Check(h, &d, &index)) return rc;
  std::memset(&props->core, 0, sizeof(props->core));
  props->core.vendorId = 0x8086;
  std::strncpy(props->core.name, d->name.c_str(), sizeof(props->core.name) - 1);
  std::sscanf(d->uuid.c_str(), "%2hhx%2hhx%2hhx%2hhx", &props->core.uuid.id[0], &props->core.uuid.id[1],
              &props->core.uuid.id[2], &props->core.uuid.id[3]);
  props->core.uuid.id[15] = static_cast<uint8_t>(index);
  std::strncpy(props->modelName, d->name.c_str(), sizeof(props->modelName) - 1);
  std::strncpy(props->serialNumber, d->serial.c_str(), sizeof(props->serialNumber) - 1);
  std::strncpy(props->driverVersion, Fixture()->driver_version.c_str(), sizeof(props->driverVersion) - 1);
  return ZE_RESULT_SUCCESS;
}

ze_result_t zesDeviceEnumMemoryModules(zes_device_handle_t h, uint32_t* count, zes_mem_handle_t* mems) {
  FakeDevice* d = nullptr;
  int index = 0;
  if (ze_result_t rc = Check(h, &d, &index)) return rc;
  if (mems != nullptr && *count >= 1) mems[0] = Encode<zes_mem_handle_t>(index);
  *count = 1;
  return ZE_RESULT_SUCCESS;
}

ze_result_t zesMemoryGetState(zes_mem_handle_t mem, zes_mem_state_t* state) {
  FakeDevice* d = nullptr;
  if (ze_result_t rc = Check(reinterpret_cast<zes_device_handle_t>(mem), &d)) return rc;
  state->size = d->memory_mib << 20;
  state->free = (d->memory_mib - d->memory_used_mib) << 20;
  state->health = d->memory_health == "degraded"   ? ZES_MEM_HEALTH_DEGRADED
                  : d->memory_health == "critical" ? ZES_MEM_HEALTH_CRITICAL
                  : d->memory_health == "replace"  ? ZES_MEM_HEALTH_REPLACE
                                                   : ZES_MEM_HEALTH_OK;
  return ZE_RESULT_SUCCESS;
}

// As the spec says: a count of 0 asks how many; a short count is ZE_RESULT_ERROR_INVALID_SIZE.
ze_result_t zesDeviceProcessesGetState(zes_device_handle_t h, uint32_t* count, zes_process_state_t* states) {
  FakeDevice* d = nullptr;
  if (ze_result_t rc = Check(h, &d)) return rc;
  const uint32_t have = *count;
  *count = static_cast<uint32_t>(d->processes.size());
  if (have == 0) return ZE_RESULT_SUCCESS;
  if (have < d->processes.size()) return ZE_RESULT_ERROR_INVALID_SIZE;
  for (size_t i = 0; i < d->processes.size(); ++i) {
    if (states[i].stype != ZES_STRUCTURE_TYPE_PROCESS_STATE) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    states[i].processId = static_cast<uint32_t>(d->processes[i].first);
    states[i].memSize = d->processes[i].second << 20;
    states[i].sharedSize = 0;
  }
  return ZE_RESULT_SUCCESS;
}

ze_result_t zesDevicePciGetProperties(zes_device_handle_t h, zes_pci_properties_t* pci) {
  FakeDevice* d = nullptr;
  if (ze_result_t rc = Check(h, &d)) return rc;
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  std::sscanf(d->pci_bus_id.c_str(), "%x:%x:%x.%x", &domain, &bus, &device, &function);
  pci->address = {domain, bus, device, function};
  pci->maxSpeed = {d->pcie_max_generation, d->pcie_max_width, -1};
  return ZE_RESULT_SUCCESS;
}

ze_result_t zesDeviceEnumFabricPorts(zes_device_handle_t h, uint32_t* count, zes_fabric_port_handle_t* ports) {
  FakeDevice* d = nullptr;
  int index = 0;
  if (ze_result_t rc = Check(h, &d, &index)) return rc;
  const int lanes = LaneCount(*d);
  if (ports != nullptr) {
    for (int i = 0; i < lanes && i < static_cast<int>(*count); ++i) {
      ports[i] = Encode<zes_fabric_port_handle_t>((static_cast<intptr_t>(index) << 8) | i);
    }
  }
  *count = static_cast<uint32_t>(lanes);
  return ZE_RESULT_SUCCESS;
}

ze_result_t zesFabricPortGetProperties(zes_fabric_port_handle_t port, zes_fabric_port_properties_t* props) {
  const intptr_t v = Decode(port);
  FakeDevice* d = nullptr;
  if (ze_result_t rc = Check(Encode<zes_device_handle_t>(v >> 8), &d)) return rc;
  props->portId.fabricId = 0x1000 + static_cast<uint32_t>(v >> 8);
  props->portId.attachId = 0;
  props->portId.portNumber = static_cast<uint8_t>(v & 0xff);
  return ZE_RESULT_SUCCESS;
}

ze_result_t zesFabricPortGetState(zes_fabric_port_handle_t port, zes_fabric_port_state_t* state) {
  const intptr_t v = Decode(port);
  FakeDevice* d = nullptr;
  if (ze_result_t rc = Check(Encode<zes_device_handle_t>(v >> 8), &d)) return rc;
  const int peer = LanePeer(*d, static_cast<int>(v & 0xff));
  const bool up = peer >= 0 && !Fixture()->devices[peer].removed;
  state->status = up ? ZES_FABRIC_PORT_STATUS_HEALTHY : ZES_FABRIC_PORT_STATUS_FAILED;
  state->remotePortId.fabricId = 0x1000 + static_cast<uint32_t>(peer < 0 ? 0xfff : peer);
  return ZE_RESULT_SUCCESS;
}

ze_result_t zesDevicePciGetState(zes_device_handle_t h, zes_pci_state_t* state) {
  FakeDevice* d = nullptr;
  if (ze_result_t rc = Check(h, &d)) return rc;
  state->status = ZES_PCI_LINK_STATUS_GOOD;
  state->speed = {d->pcie_generation, d->pcie_width, -1};
  return ZE_RESULT_SUCCESS;
}

// A wedged card asks for a reset; a pending row repair completes at the next one.
ze_result_t zesDeviceGetState(zes_device_handle_t h, zes_device_state_t* state) {
  FakeDevice* d = nullptr;
  if (ze_result_t rc = Check(h, &d)) return rc;
  state->reset = (d->problem.empty() ? 0 : ZES_RESET_REASON_FLAG_WEDGED) |
                 (d->rows_remap_pending ? ZES_RESET_REASON_FLAG_REPAIR : 0);
  state->repaired = ZES_REPAIR_STATUS_NOT_PERFORMED;
  return ZE_RESULT_SUCCESS;
}

// Two error sets a card, as on hardware with RAS: correctable (handle 2i) and uncorrectable (2i+1).
ze_result_t zesDeviceEnumRasErrorSets(zes_device_handle_t h, uint32_t* count, zes_ras_handle_t* sets) {
  FakeDevice* d = nullptr;
  int index = 0;
  if (ze_result_t rc = Check(h, &d, &index)) return rc;
  if (sets != nullptr) {
    for (uint32_t i = 0; i < *count && i < 2; ++i) sets[i] = Encode<zes_ras_handle_t>(index * 2 + i);
  }
  *count = 2;
  return ZE_RESULT_SUCCESS;
}

ze_result_t zesRasGetProperties(zes_ras_handle_t ras, zes_ras_properties_t* props) {
  const intptr_t v = Decode(ras);
  FakeDevice* d = nullptr;
  if (ze_result_t rc = Check(Encode<zes_device_handle_t>(v / 2), &d)) return rc;
  props->type = v % 2 ? ZES_RAS_ERROR_TYPE_UNCORRECTABLE : ZES_RAS_ERROR_TYPE_CORRECTABLE;
  props->onSubdevice = 0;
  props->subdeviceId = 0;
  return ZE_RESULT_SUCCESS;
}

// Uncorrected memory errors count as non-compute errors (the memory is not a compute engine).
ze_result_t zesRasGetState(zes_ras_handle_t ras, ze_bool_t, zes_ras_state_t* state) {
  const intptr_t v = Decode(ras);
  FakeDevice* d = nullptr;
  if (ze_result_t rc = Check(Encode<zes_device_handle_t>(v / 2), &d)) return rc;
  std::memset(state->category, 0, sizeof(state->category));
  if (v % 2) state->category[ZES_RAS_ERROR_CAT_NON_COMPUTE_ERRORS] = d->ecc_uncorrected_volatile;
  return ZE_RESULT_SUCCESS;
}

}  // extern "C"
