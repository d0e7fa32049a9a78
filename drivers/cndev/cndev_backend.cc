#include "drivers/cndev/cndev_backend.h"

#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "drivers/device_links.h"
#include "drivers/health_signals.h"
#include "drivers/vendor_c_abi.h"

namespace hetpool::drivers {
namespace {

LinkKind FromRelationship(int relation) {
  if (relation <= 3) return LinkKind::kPcieSwitch;  // SELF/INTERNAL/SINGLE/MULTIPLE: below one switch tree
  if (relation == 4) return LinkKind::kPcieHostBridge;
  if (relation == 5) return LinkKind::kSameNuma;
  return LinkKind::kCrossSocket;
}

std::string UuidString(const uint8_t* uuid) {
  return std::string(reinterpret_cast<const char*>(uuid),
                     strnlen(reinterpret_cast<const char*>(uuid), CNDEV_UUID_SIZE));
}

}  // namespace

absl::StatusOr<std::unique_ptr<CndevBackend>> CndevBackend::Load(const std::vector<std::string>& candidates) {
  auto loaded = OpenVendorLibrary<EntryPoints>(candidates, [](const DynamicLibrary& lib, EntryPoints& t) {
    HETPOOL_CNDEV_REQUIRED(HETPOOL_REQUIRE_ENTRY_POINT)
    HETPOOL_CNDEV_OPTIONAL(HETPOOL_OPTIONAL_ENTRY_POINT)
    return absl::OkStatus();
  });
  if (!loaded.ok()) return loaded.status();
  auto& [library, t] = *loaded;
  if (t.cndevGetMemoryUsageV2 == nullptr && t.cndevGetMemoryUsage == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(library->path(), " lacks required symbol cndevGetMemoryUsageV2 (or cndevGetMemoryUsage)"));
  }
  if (t.cndevGetPCIeInfoV2 == nullptr && t.cndevGetPCIeInfo == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(library->path(), " lacks required symbol cndevGetPCIeInfoV2 (or cndevGetPCIeInfo)"));
  }
  if (cndevRet_t rc = t.cndevInit(0); rc != CNDEV_SUCCESS) {
    return absl::UnavailableError(absl::StrCat("cndevInit: ", t.cndevGetErrorString(rc)));
  }
  return std::unique_ptr<CndevBackend>(new CndevBackend(std::move(library), t));
}

CndevBackend::~CndevBackend() { cndev_.cndevRelease(); }

std::vector<CardProcess> CndevBackend::Processes(cndevDevice_t handle) const {
  cndevProcessInfo_t blank{};
  blank.version = CNDEV_VERSION_6;
  const auto infos = ReadVendorList(blank, [&](uint32_t* count, cndevProcessInfo_t* buffer) {
    const cndevRet_t rc = cndev_.cndevGetProcessInfo(count, buffer, handle);
    if (rc == CNDEV_ERROR_INSUFFICIENT_SPACE) return VendorListRead::kTooSmall;
    return rc == CNDEV_SUCCESS ? VendorListRead::kDone : VendorListRead::kFailed;
  });
  std::vector<CardProcess> out;
  for (const auto& info : infos) out.push_back({static_cast<int>(info.pid), info.physicalMemoryUsed >> 10, ""});
  return out;
}

std::string CndevBackend::Error(cndevRet_t rc) const {
  const char* text = cndev_.cndevGetErrorString(rc);
  return text ? text : absl::StrCat("CNDev error ", rc);
}

void CndevBackend::AddHealthSignals(cndevDevice_t handle, DeviceRecord& d) const {
  if (cndev_.cndevGetCardHealthState) {
    cndevCardHealthState_t health{};
    health.version = CNDEV_VERSION_6;
    if (cndev_.cndevGetCardHealthState(&health, handle) == CNDEV_SUCCESS && health.health == 0) {
      d.signals.push_back({Severity::kFatal, "device in problem (cndevGetCardHealthState)", "cndev"});
    }
  }
  MemoryHealth memory;
  cndevECCInfo_t ecc{};
  ecc.version = CNDEV_VERSION_6;
  if (cndev_.cndevGetECCInfo && cndev_.cndevGetECCInfo(&ecc, handle) == CNDEV_SUCCESS) {
    memory.uncorrected_errors = ecc.uncorrectedError;
  }
  cndevRetiredPageStatus_t retired{};
  retired.version = CNDEV_VERSION_6;
  if (cndev_.cndevGetRetiredPagesStatus && cndev_.cndevGetRetiredPagesStatus(&retired, handle) == CNDEV_SUCCESS) {
    memory.retired_pages_pending = retired.isPending != 0;
    memory.retired_pages_failed = retired.isFailure != 0;
  }
  cndevRemappedRow_t rows{};
  rows.version = CNDEV_VERSION_6;
  if (cndev_.cndevGetRemappedRows && cndev_.cndevGetRemappedRows(&rows, handle) == CNDEV_SUCCESS) {
    memory.rows_remap_pending = rows.pendingRows != 0;
    memory.rows_remap_failed = rows.failedRows != 0;
  }
  for (HealthSignal& s : SignalsOfMemory(memory, "cndev")) d.signals.push_back(std::move(s));
  MarkUnhealthyOnFatal(d);
}

absl::StatusOr<std::vector<DeviceRecord>> CndevBackend::Discover() {
  cndevCardInfo_t cards{};
  cards.version = CNDEV_VERSION_6;
  if (cndevRet_t rc = cndev_.cndevGetDeviceCount(&cards); rc != CNDEV_SUCCESS) {
    return absl::UnavailableError(absl::StrCat("cndevGetDeviceCount: ", Error(rc)));
  }
  std::vector<DeviceRecord> devices;
  std::vector<cndevDevice_t> handles;
  std::map<std::string, size_t> by_uuid;
  for (uint32_t i = 0; i < cards.number; ++i) {
    DeviceRecord d;
    d.vendor = Vendor::kCambricon;
    d.index = static_cast<int>(i);
    d.id = absl::StrCat("cambricon", i);
    auto fail = [&d, this](const char* call, cndevRet_t rc) {
      if (d.healthy) d.health_message = absl::StrCat(call, ": ", Error(rc));
      d.healthy = false;
    };
    cndevDevice_t handle = -1;
    if (cndevRet_t rc = cndev_.cndevGetDeviceHandleByIndex(static_cast<int>(i), &handle); rc != CNDEV_SUCCESS) {
      fail("cndevGetDeviceHandleByIndex", rc);
      devices.push_back(std::move(d));
      handles.push_back(-1);
      continue;
    }
    cndevUUID_t uuid{};
    uuid.version = CNDEV_VERSION_6;
    if (cndevRet_t rc = cndev_.cndevGetUUID(&uuid, handle); rc == CNDEV_SUCCESS) {
      d.uuid = UuidString(uuid.uuid);
    } else {
      fail("cndevGetUUID", rc);
    }
    if (const char* name = cndev_.cndevGetCardNameStringByDevId(handle)) d.model = name;
    if (cndev_.cndevGetMemoryUsageV2) {
      cndevMemoryInfoV2_t memory{};
      if (cndevRet_t rc = cndev_.cndevGetMemoryUsageV2(&memory, handle); rc == CNDEV_SUCCESS) {
        d.memory_mib = static_cast<uint64_t>(memory.physicalMemoryTotal);
        d.memory_used_mib = static_cast<uint64_t>(memory.physicalMemoryUsed);
      } else {
        fail("cndevGetMemoryUsageV2", rc);
      }
    } else {
      cndevMemoryInfo_t memory{};
      memory.version = CNDEV_VERSION_6;
      if (cndevRet_t rc = cndev_.cndevGetMemoryUsage(&memory, handle); rc == CNDEV_SUCCESS) {
        d.memory_mib = static_cast<uint64_t>(memory.physicalMemoryTotal);
        d.memory_used_mib = static_cast<uint64_t>(memory.physicalMemoryUsed);
      } else {
        fail("cndevGetMemoryUsage", rc);
      }
    }
    if (cndev_.cndevGetPCIeInfoV2) {
      cndevPCIeInfoV2_t pci{};
      if (cndevRet_t rc = cndev_.cndevGetPCIeInfoV2(&pci, handle); rc == CNDEV_SUCCESS) {
        d.pci_bus_id = FormatBusId(pci.domain, pci.bus, pci.device, pci.function);
      } else {
        fail("cndevGetPCIeInfoV2", rc);
      }
    } else {
      cndevPCIeInfo_t pci{};
      pci.version = CNDEV_VERSION_6;
      if (cndevRet_t rc = cndev_.cndevGetPCIeInfo(&pci, handle); rc == CNDEV_SUCCESS) {
        d.pci_bus_id = FormatBusId(pci.domain, pci.bus, pci.device, pci.function);
      } else {
        fail("cndevGetPCIeInfo", rc);
      }
    }
    if (cndev_.cndevGetNUMANodeIdByDevId) {
      cndevNUMANodeId_t numa{};
      numa.version = CNDEV_VERSION_6;
      if (cndev_.cndevGetNUMANodeIdByDevId(&numa, handle) == CNDEV_SUCCESS) d.numa_node = numa.nodeId;
    }
    unsigned major = 0, minor = 0;
    if (cndev_.cndevGetComputeCapability && cndev_.cndevGetComputeCapability(&major, &minor, handle) == CNDEV_SUCCESS) {
      d.capability.arch_major = static_cast<int>(major);
      d.capability.arch_minor = static_cast<int>(minor);
      // The ISA name (mtp_372, mtp_592) comes from the spec table by model: CNDev's numeric
      // capability does not spell it.
    }
    if (cndev_.cndevGetVersionInfo) {
      cndevVersionInfo_t version{};
      version.version = CNDEV_VERSION_6;
      if (cndev_.cndevGetVersionInfo(&version, handle) == CNDEV_SUCCESS) {
        d.driver_version =
            absl::StrCat(version.driverMajorVersion, ".", version.driverMinorVersion, ".", version.driverBuildVersion);
      }
    }
    AddHealthSignals(handle, d);
    if (cndev_.cndevGetProcessInfo) d.processes = Processes(handle);
    if (!d.uuid.empty()) by_uuid[d.uuid] = devices.size();
    devices.push_back(std::move(d));
    handles.push_back(handle);
  }

  // MLU-Link: each active port names the UUID of the card at its far end.
  if (cndev_.cndevGetMLULinkPortNumber && cndev_.cndevGetMLULinkRemoteInfo) {
    for (size_t i = 0; i < devices.size(); ++i) {
      if (handles[i] < 0 || !devices[i].healthy) continue;
      const int ports = cndev_.cndevGetMLULinkPortNumber(handles[i]);
      for (int port = 0; port < ports; ++port) {
        if (cndev_.cndevGetMLULinkStatusV2) {
          cndevMLULinkStatusV2_t status{};
          if (cndev_.cndevGetMLULinkStatusV2(&status, handles[i], port) != CNDEV_SUCCESS || status.serdesState != 1) {
            continue;
          }
        }
        cndevMLULinkRemoteInfo_t remote{};
        remote.version = CNDEV_VERSION_6;
        if (cndev_.cndevGetMLULinkRemoteInfo(&remote, handles[i], port) != CNDEV_SUCCESS) continue;
        auto peer = by_uuid.find(UuidString(remote.uuid));
        if (peer != by_uuid.end() && peer->second != i) {
          AddFabricLane(devices[i], devices[peer->second].id, LinkKind::kMluLink);
        }
      }
    }
  }
  if (cndev_.cndevTopologyGetRelationship) {
    AddPcieLinks(devices, [&](size_t i, size_t j) -> std::optional<LinkKind> {
      if (handles[i] < 0 || handles[j] < 0) return std::nullopt;
      cndevTopologyRelationship_t rel{};
      rel.version = CNDEV_VERSION_6;
      if (cndev_.cndevTopologyGetRelationship(&rel, handles[i], handles[j]) != CNDEV_SUCCESS) return std::nullopt;
      return FromRelationship(rel.relation);
    });
  }
  return devices;
}

}  // namespace hetpool::drivers
