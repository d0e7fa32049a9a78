// A fake libnvidia-ml.so.1: NVML's C ABI (drivers/nvml/nvml_abi.h) over a JSON fixture.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "drivers/nvml/nvml_abi.h"
#include "tests/fakes/fake_fixture.h"

using hetpool::fakes::FakeDevice;
using hetpool::fakes::Fixture;

#define EXPORT __attribute__((visibility("default")))

namespace {

bool g_initialized = false;

// Handles encode the fixture index (+1, so no handle is null).
nvmlDevice_t HandleOf(int fixture_index) {
  return reinterpret_cast<nvmlDevice_t>(static_cast<intptr_t>(fixture_index) + 1);
}

// Common preamble of every device call: initialized, injected fault, valid and present device.
nvmlReturn_t Check(nvmlDevice_t handle, FakeDevice** out) {
  if (!g_initialized) return NVML_ERROR_UNINITIALIZED;
  if (int rc = hetpool::fakes::TakeInjectedError()) return rc;
  const intptr_t index = reinterpret_cast<intptr_t>(handle) - 1;
  auto* f = Fixture();
  if (f == nullptr || index < 0 || index >= static_cast<intptr_t>(f->devices.size()))
    return NVML_ERROR_INVALID_ARGUMENT;
  if (f->devices[index].removed) return NVML_ERROR_GPU_IS_LOST;
  *out = &f->devices[index];
  return NVML_SUCCESS;
}

void FillPci(const std::string& bus_id, nvmlPciInfo_t* pci) {
  std::memset(pci, 0, sizeof(*pci));
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  std::sscanf(bus_id.c_str(), "%x:%x:%x.%x", &domain, &bus, &device, &function);
  pci->domain = domain;
  pci->bus = bus;
  pci->device = device;
  std::snprintf(pci->busId, sizeof(pci->busId), "%08X:%02X:%02X.0", domain, bus, device);
  std::snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.0", domain, bus, device);
}

// The NVLink lanes of a device flattened: lane i -> (peer fixture index, switch bus id).
std::vector<std::pair<int, std::string>> Lanes(const FakeDevice& d) {
  std::vector<std::pair<int, std::string>> lanes;
  for (const auto& l : d.links) {
    for (int k = 0; k < l.lanes; ++k) lanes.emplace_back(l.peer, l.switch_id);
  }
  return lanes;
}

// A per-card query answered with one value read off the card's fixture entry.
template <typename Out, typename Read>
nvmlReturn_t Answer(nvmlDevice_t handle, Out* out, Read read) {
  FakeDevice* d = nullptr;
  if (nvmlReturn_t rc = Check(handle, &d); rc != NVML_SUCCESS) return rc;
  *out = static_cast<Out>(read(*d));
  return NVML_SUCCESS;
}

}  // namespace

extern "C" {

EXPORT nvmlReturn_t nvmlInit_v2(void) {
  if (hetpool::fakes::FixtureFor("nvidia") == nullptr) return NVML_ERROR_UNKNOWN;  // like a missing kernel driver
  g_initialized = true;
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlShutdown(void) {
  g_initialized = false;
  return NVML_SUCCESS;
}

EXPORT const char* nvmlErrorString(nvmlReturn_t rc) {
  switch (rc) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    default: return "Unknown Error";
  }
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (!g_initialized) return NVML_ERROR_UNINITIALIZED;
  if (int rc = hetpool::fakes::TakeInjectedError()) return rc;
  *count = static_cast<unsigned>(hetpool::fakes::VisibleDevices().size());
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (!g_initialized) return NVML_ERROR_UNINITIALIZED;
  if (int rc = hetpool::fakes::TakeInjectedError()) return rc;
  auto visible = hetpool::fakes::VisibleDevices();
  if (index >= visible.size()) return NVML_ERROR_INVALID_ARGUMENT;
  *device = HandleOf(visible[index]);
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  FakeDevice* d = nullptr;
  if (nvmlReturn_t rc = Check(device, &d)) return rc;
  return hetpool::fakes::CopyString(d->uuid, uuid, length) ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  FakeDevice* d = nullptr;
  if (nvmlReturn_t rc = Check(device, &d)) return rc;
  return hetpool::fakes::CopyString(d->name, name, length) ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
}

EXPORT nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char* serial, unsigned int length) {
  FakeDevice* d = nullptr;
  if (nvmlReturn_t rc = Check(device, &d)) return rc;
  return hetpool::fakes::CopyString(d->serial, serial, length) ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
}

#ifndef HETPOOL_FAKE_INCOMPLETE  // the "incomplete" fake lacks this required symbol
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  FakeDevice* d = nullptr;
  if (nvmlReturn_t rc = Check(device, &d)) return rc;
  memory->total = d->memory_mib << 20;
  memory->used = d->memory_used_mib << 20;
  memory->free = memory->total - memory->used;
  return NVML_SUCCESS;
}
#endif

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  FakeDevice* d = nullptr;
  if (nvmlReturn_t rc = Check(device, &d)) return rc;
  FillPci(d->pci_bus_id, pci);
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major, int* minor) {
  FakeDevice* d = nullptr;
  if (nvmlReturn_t rc = Check(device, &d)) return rc;
  *major = d->arch_major;
  *minor = d->arch_minor;
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int* node) {
  FakeDevice* d = nullptr;
  if (nvmlReturn_t rc = Check(device, &d)) return rc;
  if (d->numa_node < 0) return NVML_ERROR_NOT_SUPPORTED;
  *node = static_cast<unsigned>(d->numa_node);
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minor) {
  FakeDevice* d = nullptr;
  if (nvmlReturn_t rc = Check(device, &d)) return rc;
  (void)d;
  *minor = static_cast<unsigned>(reinterpret_cast<intptr_t>(device) - 1);  // the fixture index, as on a real host
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                            nvmlProcessInfo_t* infos) {
  FakeDevice* d = nullptr;
  if (nvmlReturn_t rc = Check(device, &d); rc != NVML_SUCCESS) return rc;
  // NVML's contract: too small a buffer gets the count needed and INSUFFICIENT_SIZE.
  const unsigned int have = *count;
  *count = static_cast<unsigned int>(d->processes.size());
  if (have < d->processes.size()) return NVML_ERROR_INSUFFICIENT_SIZE;
  for (size_t i = 0; i < d->processes.size(); ++i) {
    infos[i] = nvmlProcessInfo_t{static_cast<unsigned int>(d->processes[i].first), d->processes[i].second << 20, 0, 0};
  }
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* util) {
  FakeDevice* d = nullptr;
  if (nvmlReturn_t rc = Check(device, &d)) return rc;
  util->gpu = static_cast<unsigned>(d->utilization);
  util->memory = 0;
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (!g_initialized) return NVML_ERROR_UNINITIALIZED;
  return hetpool::fakes::CopyString(Fixture()->driver_version, version, length) ? NVML_SUCCESS
                                                                                : NVML_ERROR_INSUFFICIENT_SIZE;
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* version) {
  if (!g_initialized) return NVML_ERROR_UNINITIALIZED;
  int major = 0, minor = 0;
  std::sscanf(Fixture()->runtime_version.c_str(), "%d.%d", &major, &minor);
  *version = major * 1000 + minor * 10;
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b, nvmlGpuTopologyLevel_t* level) {
  FakeDevice *da = nullptr, *db = nullptr;
  if (nvmlReturn_t rc = Check(a, &da)) return rc;
  if (nvmlReturn_t rc = Check(b, &db)) return rc;
  static const nvmlGpuTopologyLevel_t kLevels[] = {NVML_TOPOLOGY_INTERNAL, NVML_TOPOLOGY_SINGLE,
                                                   NVML_TOPOLOGY_HOSTBRIDGE, NVML_TOPOLOGY_NODE, NVML_TOPOLOGY_SYSTEM};
  *level = kLevels[hetpool::fakes::PcieDistance(*da, *db)];
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, nvmlEnableState_t* active) {
  FakeDevice* d = nullptr;
  if (nvmlReturn_t rc = Check(device, &d)) return rc;
  if (link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  const auto lanes = Lanes(*d);
  if (link >= lanes.size()) return NVML_ERROR_NOT_SUPPORTED;
  // A lane to a removed peer is down.
  const int peer = lanes[link].first;
  *active = peer < 0 || !Fixture()->devices[peer].removed;
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t device, unsigned int link, int counter,
                                                    unsigned long long* value) {
  FakeDevice* d = nullptr;
  if (nvmlReturn_t rc = Check(device, &d)) return rc;
  if (link >= Lanes(*d).size()) return NVML_ERROR_INVALID_ARGUMENT;
  *value = link == 0 && counter == NVML_NVLINK_ERROR_DL_RECOVERY ? d->nvlink_recoveries : 0;
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t* pci) {
  FakeDevice* d = nullptr;
  if (nvmlReturn_t rc = Check(device, &d)) return rc;
  const auto lanes = Lanes(*d);
  if (link >= lanes.size()) return NVML_ERROR_NOT_SUPPORTED;
  const auto& [peer, switch_id] = lanes[link];
  FillPci(peer >= 0 ? Fixture()->devices[peer].pci_bus_id : switch_id, pci);
  return NVML_SUCCESS;
}

// Health (issue 61). An event set is the set of fixture indices registered with it; each device's
// Xids are handed out once each, in order, across all sets (the count delivered is kept by UUID,
// so a rewritten fixture adds events rather than replaying them).
namespace {
struct FakeEventSet {
  std::set<int> devices;
};
std::mutex g_events_mu;
std::map<std::string, size_t> g_xids_delivered;  // by UUID

}  // namespace

EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  if (!g_initialized) return NVML_ERROR_UNINITIALIZED;
  *set = reinterpret_cast<nvmlEventSet_t>(new FakeEventSet());
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t handle, unsigned long long types, nvmlEventSet_t set) {
  FakeDevice* d = nullptr;
  if (nvmlReturn_t rc = Check(handle, &d); rc != NVML_SUCCESS) return rc;
  if ((types & nvmlEventTypeXidCriticalError) == 0) return NVML_ERROR_NOT_SUPPORTED;
  std::lock_guard<std::mutex> lock(g_events_mu);
  reinterpret_cast<FakeEventSet*>(set)->devices.insert(static_cast<int>(reinterpret_cast<intptr_t>(handle) - 1));
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeout_ms) {
  if (!g_initialized) return NVML_ERROR_UNINITIALIZED;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    {
      std::lock_guard<std::mutex> lock(g_events_mu);
      auto* f = Fixture();
      for (int index : reinterpret_cast<FakeEventSet*>(set)->devices) {
        if (f == nullptr || index >= static_cast<int>(f->devices.size())) continue;
        const FakeDevice& d = f->devices[static_cast<size_t>(index)];
        size_t& delivered = g_xids_delivered[d.uuid];
        if (delivered >= d.xid_events.size()) continue;
        std::memset(data, 0, sizeof(*data));
        data->device = HandleOf(index);
        data->eventType = nvmlEventTypeXidCriticalError;
        data->eventData = static_cast<unsigned long long>(d.xid_events[delivered++]);
        return NVML_SUCCESS;
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) return NVML_ERROR_TIMEOUT;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  delete reinterpret_cast<FakeEventSet*>(set);
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t handle, nvmlMemoryErrorType_t type,
                                                nvmlEccCounterType_t counter, unsigned long long* count) {
  FakeDevice* d = nullptr;
  if (nvmlReturn_t rc = Check(handle, &d); rc != NVML_SUCCESS) return rc;
  *count = type == NVML_MEMORY_ERROR_TYPE_UNCORRECTED && counter == NVML_VOLATILE_ECC ? d->ecc_uncorrected_volatile : 0;
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t handle, unsigned int* corrected, unsigned int* uncorrected,
                                              unsigned int* pending, unsigned int* failed) {
  FakeDevice* d = nullptr;
  if (nvmlReturn_t rc = Check(handle, &d); rc != NVML_SUCCESS) return rc;
  *corrected = 0;
  *uncorrected = d->rows_remap_failed ? 1 : 0;
  *pending = d->rows_remap_pending ? 1 : 0;
  *failed = d->rows_remap_failed ? 1 : 0;
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t handle, nvmlEnableState_t* pending) {
  return Answer(handle, pending, [](const FakeDevice& d) { return d.retired_pages_pending ? 1 : 0; });
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t handle, unsigned int* width) {
  return Answer(handle, width, [](const FakeDevice& d) { return d.pcie_width; });
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t handle, unsigned int* width) {
  return Answer(handle, width, [](const FakeDevice& d) { return d.pcie_max_width; });
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t handle, unsigned int* generation) {
  return Answer(handle, generation, [](const FakeDevice& d) { return d.pcie_generation; });
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t handle, unsigned int* generation) {
  return Answer(handle, generation, [](const FakeDevice& d) { return d.pcie_max_generation; });
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t handle, unsigned long long* reasons) {
  return Answer(handle, reasons, [](const FakeDevice& d) { return d.clock_reasons; });
}

}  // extern "C"
