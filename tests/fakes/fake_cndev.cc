// A fake libcndev.so: CNDev's C ABI (drivers/cndev/cndev_abi.h) over a JSON fixture. Built twice:
// with the V2 calls, and (HETPOOL_FAKE_CNDEV_LEGACY) with only the pre-V2 names.
#include <cstdio>
#include <cstring>

#include "drivers/cndev/cndev_abi.h"
#include "tests/fakes/fake_fixture.h"

using hetpool::fakes::FakeDevice;
using hetpool::fakes::Fixture;

#define EXPORT __attribute__((visibility("default")))

namespace {

bool g_initialized = false;

// Handles are fixture indices.
cndevRet_t Check(cndevDevice_t handle, FakeDevice** out) {
  if (!g_initialized) return CNDEV_ERROR_UNINITIALIZED;
  if (int rc = hetpool::fakes::TakeInjectedError()) return rc;
  auto* f = Fixture();
  if (handle < 0 || handle >= static_cast<int>(f->devices.size())) return CNDEV_ERROR_INVALID_DEVICE_ID;
  if (f->devices[handle].removed) return CNDEV_ERROR_IN_PROBLEM;
  *out = &f->devices[handle];
  return CNDEV_SUCCESS;
}

void ParseBus(const std::string& bus_id, uint32_t* domain, uint32_t* bus, uint32_t* device, uint32_t* function) {
  unsigned d = 0, b = 0, dev = 0, fn = 0;
  std::sscanf(bus_id.c_str(), "%x:%x:%x.%x", &d, &b, &dev, &fn);
  *domain = d;
  *bus = b;
  *device = dev;
  *function = fn;
}

// Port p of a device -> fixture index of the peer (lanes expanded in order).
int PortPeer(const FakeDevice& d, int port) {
  for (const auto& l : d.links) {
    if (port < l.lanes) return l.peer;
    port -= l.lanes;
  }
  return -2;
}

}  // namespace

extern "C" {

EXPORT cndevRet_t cndevInit(int) {
  if (hetpool::fakes::FixtureFor("cambricon") == nullptr) return CNDEV_ERROR_NO_DRIVER;
  g_initialized = true;
  return CNDEV_SUCCESS;
}

EXPORT cndevRet_t cndevRelease(void) {
  g_initialized = false;
  return CNDEV_SUCCESS;
}

EXPORT const char* cndevGetErrorString(cndevRet_t rc) {
  switch (rc) {
    case CNDEV_SUCCESS: return "No error";
    case CNDEV_ERROR_UNINITIALIZED: return "API not Initial";
    case CNDEV_ERROR_INVALID_DEVICE_ID: return "Invalid device id";
    case CNDEV_ERROR_IN_PROBLEM: return "MLU device is in problem";
    default: return "Unknown error";
  }
}

EXPORT cndevRet_t cndevGetDeviceCount(cndevCardInfo_t* info) {
  if (!g_initialized) return CNDEV_ERROR_UNINITIALIZED;
  if (info->version != CNDEV_VERSION_6) return 3;  // CNDEV_ERROR_UNSUPPORTED_API_VERSION
  if (int rc = hetpool::fakes::TakeInjectedError()) return rc;
  info->number = static_cast<uint32_t>(hetpool::fakes::VisibleDevices().size());
  return CNDEV_SUCCESS;
}

EXPORT cndevRet_t cndevGetDeviceHandleByIndex(int index, cndevDevice_t* handle) {
  if (!g_initialized) return CNDEV_ERROR_UNINITIALIZED;
  if (int rc = hetpool::fakes::TakeInjectedError()) return rc;
  auto visible = hetpool::fakes::VisibleDevices();
  if (index < 0 || index >= static_cast<int>(visible.size())) return CNDEV_ERROR_INVALID_DEVICE_ID;
  *handle = visible[index];
  return CNDEV_SUCCESS;
}

EXPORT cndevRet_t cndevGetUUID(cndevUUID_t* uuid, cndevDevice_t handle) {
  FakeDevice* d = nullptr;
  if (cndevRet_t rc = Check(handle, &d)) return rc;
  std::memset(uuid->uuid, 0, sizeof(uuid->uuid));
  std::strncpy(reinterpret_cast<char*>(uuid->uuid), d->uuid.c_str(), CNDEV_UUID_SIZE - 1);
  return CNDEV_SUCCESS;
}

EXPORT const char* cndevGetCardNameStringByDevId(cndevDevice_t handle) {
  auto* f = Fixture();
  if (f == nullptr || handle < 0 || handle >= static_cast<int>(f->devices.size())) return nullptr;
  return f->devices[handle].name.c_str();
}

#ifndef HETPOOL_FAKE_CNDEV_LEGACY
EXPORT cndevRet_t cndevGetMemoryUsageV2(cndevMemoryInfoV2_t* memory, cndevDevice_t handle) {
  FakeDevice* d = nullptr;
  if (cndevRet_t rc = Check(handle, &d)) return rc;
  std::memset(memory, 0, sizeof(*memory));
  memory->physicalMemoryTotal = static_cast<int64_t>(d->memory_mib);
  memory->physicalMemoryUsed = static_cast<int64_t>(d->memory_used_mib);
  return CNDEV_SUCCESS;
}

EXPORT cndevRet_t cndevGetPCIeInfoV2(cndevPCIeInfoV2_t* pci, cndevDevice_t handle) {
  FakeDevice* d = nullptr;
  if (cndevRet_t rc = Check(handle, &d)) return rc;
  std::memset(pci, 0, sizeof(*pci));
  ParseBus(d->pci_bus_id, &pci->domain, &pci->bus, &pci->device, &pci->function);
  pci->vendor = 0xcabc;
  return CNDEV_SUCCESS;
}
#else
EXPORT cndevRet_t cndevGetMemoryUsage(cndevMemoryInfo_t* memory, cndevDevice_t handle) {
  FakeDevice* d = nullptr;
  if (cndevRet_t rc = Check(handle, &d)) return rc;
  if (memory->version != CNDEV_VERSION_6) return 3;
  memory->physicalMemoryTotal = static_cast<int64_t>(d->memory_mib);
  memory->physicalMemoryUsed = static_cast<int64_t>(d->memory_used_mib);
  return CNDEV_SUCCESS;
}

EXPORT cndevRet_t cndevGetPCIeInfo(cndevPCIeInfo_t* pci, cndevDevice_t handle) {
  FakeDevice* d = nullptr;
  if (cndevRet_t rc = Check(handle, &d)) return rc;
  if (pci->version != CNDEV_VERSION_6) return 3;
  ParseBus(d->pci_bus_id, &pci->domain, &pci->bus, &pci->device, &pci->function);
  return CNDEV_SUCCESS;
}
#endif

EXPORT cndevRet_t cndevGetNUMANodeIdByDevId(cndevNUMANodeId_t* numa, cndevDevice_t handle) {
  FakeDevice* d = nullptr;
  if (cndevRet_t rc = Check(handle, &d)) return rc;
  numa->nodeId = d->numa_node;
  return CNDEV_SUCCESS;
}

EXPORT cndevRet_t cndevGetComputeCapability(unsigned int* major, unsigned int* minor, cndevDevice_t handle) {
  FakeDevice* d = nullptr;
  if (cndevRet_t rc = Check(handle, &d)) return rc;
  *major = static_cast<unsigned>(d->arch_major);
  *minor = static_cast<unsigned>(d->arch_minor);
  return CNDEV_SUCCESS;
}

EXPORT cndevRet_t cndevGetVersionInfo(cndevVersionInfo_t* version, cndevDevice_t handle) {
  FakeDevice* d = nullptr;
  if (cndevRet_t rc = Check(handle, &d)) return rc;
  unsigned major = 0, minor = 0, build = 0;
  std::sscanf(Fixture()->driver_version.c_str(), "%u.%u.%u", &major, &minor, &build);
  version->driverMajorVersion = major;
  version->driverMinorVersion = minor;
  version->driverBuildVersion = build;
  return CNDEV_SUCCESS;
}

EXPORT cndevRet_t cndevGetCardHealthState(cndevCardHealthState_t* health, cndevDevice_t handle) {
  FakeDevice* d = nullptr;
  if (cndevRet_t rc = Check(handle, &d)) return rc;
  health->health = d->problem.empty() ? 1 : 0;  // CNDEV_HEALTH_STATE_DEVICE_GOOD : _IN_PROBLEM
  health->deviceState = 1;
  health->driverState = 4;
  return CNDEV_SUCCESS;
}

EXPORT cndevRet_t cndevGetECCInfo(cndevECCInfo_t* ecc, cndevDevice_t handle) {
  FakeDevice* d = nullptr;
  if (cndevRet_t rc = Check(handle, &d)) return rc;
  if (ecc->version != CNDEV_VERSION_6) return 3;
  ecc->uncorrectedError = d->ecc_uncorrected_volatile;
  ecc->multipleError = d->ecc_uncorrected_volatile;
  ecc->totalError = d->ecc_uncorrected_volatile;
  return CNDEV_SUCCESS;
}

EXPORT cndevRet_t cndevGetRetiredPagesStatus(cndevRetiredPageStatus_t* status, cndevDevice_t handle) {
  FakeDevice* d = nullptr;
  if (cndevRet_t rc = Check(handle, &d)) return rc;
  if (status->version != CNDEV_VERSION_6) return 3;
  status->isPending = d->retired_pages_pending ? 1 : 0;
  status->isFailure = d->retired_pages_failed ? 1 : 0;
  return CNDEV_SUCCESS;
}

EXPORT cndevRet_t cndevGetRemappedRows(cndevRemappedRow_t* rows, cndevDevice_t handle) {
  FakeDevice* d = nullptr;
  if (cndevRet_t rc = Check(handle, &d)) return rc;
  if (rows->version != CNDEV_VERSION_6) return 3;
  rows->correctRows = 0;
  rows->uncorrectRows = d->rows_remap_failed ? 1 : 0;
  rows->pendingRows = d->rows_remap_pending ? 1 : 0;
  rows->failedRows = d->rows_remap_failed ? 1 : 0;
  return CNDEV_SUCCESS;
}

// As CNDev does: a short buffer is an error and *count says how many there are.
EXPORT cndevRet_t cndevGetProcessInfo(unsigned* count, cndevProcessInfo_t* infos, cndevDevice_t handle) {
  FakeDevice* d = nullptr;
  if (cndevRet_t rc = Check(handle, &d)) return rc;
  if (infos == nullptr || infos[0].version != CNDEV_VERSION_6) return CNDEV_ERROR_INVALID_ARGUMENT;
  const unsigned have = *count;
  *count = static_cast<unsigned>(d->processes.size());
  if (have < d->processes.size()) return CNDEV_ERROR_INSUFFICIENT_SPACE;
  for (size_t i = 0; i < d->processes.size(); ++i) {
    infos[i].pid = static_cast<uint32_t>(d->processes[i].first);
    infos[i].physicalMemoryUsed = d->processes[i].second << 10;  // KiB
    infos[i].virtualMemoryUsed = d->processes[i].second << 10;
  }
  return CNDEV_SUCCESS;
}

EXPORT cndevRet_t cndevTopologyGetRelationship(cndevTopologyRelationship_t* rel, cndevDevice_t a, cndevDevice_t b) {
  FakeDevice *da = nullptr, *db = nullptr;
  if (cndevRet_t rc = Check(a, &da)) return rc;
  if (cndevRet_t rc = Check(b, &db)) return rc;
  static const int kRelation[] = {0, 2, 4, 5, 6};  // SELF, SINGLE, HOST_BRIDGE, CPU, SYSTEM
  rel->relation = a == b ? 0 : kRelation[hetpool::fakes::PcieDistance(*da, *db)];
  return CNDEV_SUCCESS;
}

EXPORT int cndevGetMLULinkPortNumber(cndevDevice_t handle) {
  FakeDevice* d = nullptr;
  if (Check(handle, &d) != CNDEV_SUCCESS) return 0;
  int ports = 0;
  for (const auto& l : d->links) ports += l.lanes;
  return ports;
}

EXPORT cndevRet_t cndevGetMLULinkStatusV2(cndevMLULinkStatusV2_t* status, cndevDevice_t handle, int port) {
  FakeDevice* d = nullptr;
  if (cndevRet_t rc = Check(handle, &d)) return rc;
  const int peer = PortPeer(*d, port);
  if (peer == -2) return CNDEV_ERROR_INVALID_LINK;
  std::memset(status, 0, sizeof(*status));
  const bool up = peer >= 0 && !Fixture()->devices[peer].removed;
  status->macState = up ? 1 : 0;
  status->serdesState = up ? 1 : 0;
  return CNDEV_SUCCESS;
}

EXPORT cndevRet_t cndevGetMLULinkRemoteInfo(cndevMLULinkRemoteInfo_t* remote, cndevDevice_t handle, int port) {
  FakeDevice* d = nullptr;
  if (cndevRet_t rc = Check(handle, &d)) return rc;
  const int peer = PortPeer(*d, port);
  if (peer < 0) return CNDEV_ERROR_INVALID_LINK;
  std::memset(remote->uuid, 0, sizeof(remote->uuid));
  std::strncpy(reinterpret_cast<char*>(remote->uuid), Fixture()->devices[peer].uuid.c_str(), CNDEV_UUID_SIZE - 1);
  remote->portId = static_cast<uint32_t>(port);
  return CNDEV_SUCCESS;
}

}  // extern "C"
