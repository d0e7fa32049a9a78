#include "drivers/nvml/nvml_backend.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "drivers/device_links.h"
#include "drivers/health_signals.h"
#include "drivers/nvml/nvml_health.h"
#include "drivers/vendor_c_abi.h"

namespace hetpool::drivers {
namespace {

LinkKind FromTopologyLevel(nvmlGpuTopologyLevel_t level) {
  if (level <= NVML_TOPOLOGY_MULTIPLE) return LinkKind::kPcieSwitch;  // same board / switch tree
  if (level <= NVML_TOPOLOGY_HOSTBRIDGE) return LinkKind::kPcieHostBridge;
  if (level <= NVML_TOPOLOGY_NODE) return LinkKind::kSameNuma;
  return LinkKind::kCrossSocket;
}

std::string DriverVersionString(int cuda_version) {
  // 12040 -> "12.4"
  return absl::StrCat(cuda_version / 1000, ".", (cuda_version % 1000) / 10);
}

}  // namespace

absl::StatusOr<std::unique_ptr<NvmlBackend>> NvmlBackend::Load(const std::vector<std::string>& candidates) {
  auto loaded = OpenVendorLibrary<EntryPoints>(candidates, [](const DynamicLibrary& lib, EntryPoints& t) {
    HETPOOL_NVML_REQUIRED(HETPOOL_REQUIRE_ENTRY_POINT)
    HETPOOL_NVML_OPTIONAL(HETPOOL_OPTIONAL_ENTRY_POINT)
    return absl::OkStatus();
  });
  if (!loaded.ok()) return loaded.status();
  auto& [library, t] = *loaded;
  if (nvmlReturn_t rc = t.nvmlInit_v2(); rc != NVML_SUCCESS) {
    return absl::UnavailableError(absl::StrCat("nvmlInit_v2: ", t.nvmlErrorString(rc)));
  }
  return std::unique_ptr<NvmlBackend>(new NvmlBackend(std::move(library), t));
}

NvmlBackend::~NvmlBackend() {
  stop_ = true;
  if (watcher_.joinable()) watcher_.join();
  nvml_.nvmlShutdown();
}

std::string NvmlBackend::WatchHealth(std::function<void()> changed) {
  if (watcher_.joinable() || !nvml_.nvmlEventSetCreate || !nvml_.nvmlDeviceRegisterEvents ||
      !nvml_.nvmlEventSetWait_v2 || !nvml_.nvmlEventSetFree) {
    return watcher_.joinable() ? "" : "no Xid events: this NVML lacks the event calls";
  }
  nvmlEventSet_t set = nullptr;
  if (nvmlReturn_t rc = nvml_.nvmlEventSetCreate(&set); rc != NVML_SUCCESS) {
    return absl::StrCat("no Xid events: nvmlEventSetCreate: ", Error(rc));
  }
  unsigned int count = 0;
  int registered = 0;
  if (nvml_.nvmlDeviceGetCount_v2(&count) == NVML_SUCCESS) {
    for (unsigned int i = 0; i < count; ++i) {
      nvmlDevice_t handle = nullptr;
      if (nvml_.nvmlDeviceGetHandleByIndex_v2(i, &handle) != NVML_SUCCESS) continue;
      // A card that supports no Xid events (or refuses: not root) is read through its counters.
      if (nvml_.nvmlDeviceRegisterEvents(handle, nvmlEventTypeXidCriticalError, set) == NVML_SUCCESS) ++registered;
    }
  }
  if (registered == 0) {
    nvml_.nvmlEventSetFree(set);
    return "no Xid events: no card accepted nvmlDeviceRegisterEvents (the counters are still read)";
  }
  {
    std::lock_guard<std::mutex> lock(health_mu_);
    health_changed_ = std::move(changed);
  }
  watcher_ = std::thread([this, set] { WaitForEvents(set); });
  return absl::StrCat("Xid events on ", registered, " of ", count, " card(s)");
}

void NvmlBackend::WaitForEvents(nvmlEventSet_t set) {
  while (!stop_) {
    nvmlEventData_t data{};
    // A bounded wait, so that the backend's destructor is never held up longer than this.
    const nvmlReturn_t rc = nvml_.nvmlEventSetWait_v2(set, &data, 500);
    if (rc == NVML_ERROR_TIMEOUT) continue;
    if (rc != NVML_SUCCESS) {
      if (rc == NVML_ERROR_GPU_IS_LOST) continue;  // discovery reports the lost card
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      continue;
    }
    if ((data.eventType & nvmlEventTypeXidCriticalError) == 0) continue;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (nvml_.nvmlDeviceGetUUID(data.device, uuid, sizeof(uuid)) != NVML_SUCCESS) continue;
    // Latched once per distinct signal and at most kMaxSignalsPerCard of them: an application
    // that raises Xid 13 in a loop must not grow the agent's memory or every report it sends.
    constexpr size_t kMaxSignalsPerCard = 16;
    HealthSignal signal = SignalOfXid(data.eventData);
    std::function<void()> changed;
    {
      std::lock_guard<std::mutex> lock(health_mu_);
      std::vector<HealthSignal>& latched = latched_[uuid];
      const bool known =
          std::any_of(latched.begin(), latched.end(), [&](const HealthSignal& s) { return s.what == signal.what; });
      if (known || latched.size() >= kMaxSignalsPerCard) continue;
      latched.push_back(std::move(signal));
      changed = health_changed_;
    }
    if (changed) changed();
  }
  nvml_.nvmlEventSetFree(set);
}

void NvmlBackend::AddHealthSignals(nvmlDevice_t handle, DeviceRecord& d) {
  {
    std::lock_guard<std::mutex> lock(health_mu_);
    if (auto it = latched_.find(d.uuid); it != latched_.end()) {
      d.signals.insert(d.signals.end(), it->second.begin(), it->second.end());
    }
  }
  MemoryHealth memory;
  unsigned long long ecc = 0;
  if (nvml_.nvmlDeviceGetTotalEccErrors && nvml_.nvmlDeviceGetTotalEccErrors(handle, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                                                             NVML_VOLATILE_ECC, &ecc) == NVML_SUCCESS) {
    memory.uncorrected_errors = ecc;
  }
  unsigned int corrected = 0, uncorrected = 0, pending = 0, failed = 0;
  if (nvml_.nvmlDeviceGetRemappedRows &&
      nvml_.nvmlDeviceGetRemappedRows(handle, &corrected, &uncorrected, &pending, &failed) == NVML_SUCCESS) {
    memory.rows_remap_pending = pending != 0;
    memory.rows_remap_failed = failed != 0;
  }
  nvmlEnableState_t retired = 0;
  if (nvml_.nvmlDeviceGetRetiredPagesPendingStatus &&
      nvml_.nvmlDeviceGetRetiredPagesPendingStatus(handle, &retired) == NVML_SUCCESS) {
    memory.retired_pages_pending = retired != 0;
  }
  for (HealthSignal& s : SignalsOfMemory(memory, "nvml")) d.signals.push_back(std::move(s));
  PcieLinkHealth link;
  auto read = [&](auto* call, int& out) {
    unsigned int value = 0;
    if (call != nullptr && call(handle, &value) == NVML_SUCCESS) out = static_cast<int>(value);
  };
  read(nvml_.nvmlDeviceGetCurrPcieLinkWidth, link.width);
  read(nvml_.nvmlDeviceGetMaxPcieLinkWidth, link.max_width);
  read(nvml_.nvmlDeviceGetCurrPcieLinkGeneration, link.generation);
  read(nvml_.nvmlDeviceGetMaxPcieLinkGeneration, link.max_generation);
  if (auto s = SignalOfPcieLink(link, "nvml")) d.signals.push_back(std::move(*s));
  unsigned long long reasons = 0;
  if (nvml_.nvmlDeviceGetCurrentClocksThrottleReasons &&
      nvml_.nvmlDeviceGetCurrentClocksThrottleReasons(handle, &reasons) == NVML_SUCCESS) {
    if (auto s = SignalOfClockReasons(reasons)) d.signals.push_back(std::move(*s));
  }
  MarkUnhealthyOnFatal(d);
}

std::string NvmlBackend::Error(nvmlReturn_t rc) const {
  const char* text = nvml_.nvmlErrorString(rc);
  return text ? text : absl::StrCat("NVML error ", rc);
}

std::vector<CardProcess> NvmlBackend::ComputeProcesses(nvmlDevice_t handle) const {
  const auto infos = ReadVendorList(nvmlProcessInfo_t{}, [&](uint32_t* count, nvmlProcessInfo_t* buffer) {
    const nvmlReturn_t rc = nvml_.nvmlDeviceGetComputeRunningProcesses_v3(handle, count, buffer);
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) return VendorListRead::kTooSmall;
    return rc == NVML_SUCCESS ? VendorListRead::kDone : VendorListRead::kFailed;
  });
  std::vector<CardProcess> out;
  for (const auto& info : infos) {
    const unsigned long long used = info.usedGpuMemory;
    out.push_back({static_cast<int>(info.pid), used == NVML_VALUE_NOT_AVAILABLE ? 0 : used >> 20, ""});
  }
  return out;
}

absl::StatusOr<std::vector<DeviceRecord>> NvmlBackend::CardProcesses() {
  if (!nvml_.nvmlDeviceGetComputeRunningProcesses_v3) return std::vector<DeviceRecord>{};
  unsigned int count = 0;
  if (nvmlReturn_t rc = nvml_.nvmlDeviceGetCount_v2(&count); rc != NVML_SUCCESS) {
    return absl::UnavailableError(absl::StrCat("nvmlDeviceGetCount_v2: ", Error(rc)));
  }
  std::vector<DeviceRecord> cards;
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t handle = nullptr;
    if (nvml_.nvmlDeviceGetHandleByIndex_v2(i, &handle) != NVML_SUCCESS) continue;
    DeviceRecord d;
    d.vendor = Vendor::kNvidia;
    d.index = static_cast<int>(i);
    d.id = absl::StrCat("nvidia", i);
    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (nvml_.nvmlDeviceGetUUID(handle, buf, sizeof(buf)) == NVML_SUCCESS) d.uuid = buf;
    d.processes = ComputeProcesses(handle);
    cards.push_back(std::move(d));
  }
  return cards;
}

absl::StatusOr<std::vector<DeviceRecord>> NvmlBackend::Discover() {
  unsigned int count = 0;
  if (nvmlReturn_t rc = nvml_.nvmlDeviceGetCount_v2(&count); rc != NVML_SUCCESS) {
    return absl::UnavailableError(absl::StrCat("nvmlDeviceGetCount_v2: ", Error(rc)));
  }
  char text[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  std::string driver_version;
  if (nvml_.nvmlSystemGetDriverVersion(text, sizeof(text)) == NVML_SUCCESS) driver_version = text;
  std::string cuda_version;
  int cuda = 0;
  if (nvml_.nvmlSystemGetCudaDriverVersion_v2 && nvml_.nvmlSystemGetCudaDriverVersion_v2(&cuda) == NVML_SUCCESS) {
    cuda_version = DriverVersionString(cuda);
  }

  std::vector<DeviceRecord> devices;
  std::vector<nvmlDevice_t> handles;
  for (unsigned int i = 0; i < count; ++i) {
    DeviceRecord d;
    d.vendor = Vendor::kNvidia;
    d.index = static_cast<int>(i);
    d.id = absl::StrCat("nvidia", i);
    d.driver_version = driver_version;
    d.capability.runtime_version = cuda_version;
    nvmlDevice_t handle = nullptr;
    // A call that fails marks this device unhealthy with NVML's words; the rest carry on.
    auto fail = [&d, this](const char* call, nvmlReturn_t rc) {
      if (d.healthy) d.health_message = absl::StrCat(call, ": ", Error(rc));
      d.healthy = false;
      // A lost card stays lost until it is reset: a fatal signal, so that it is quarantined (and
      // its jobs requeued) rather than only skipped while the call fails.
      if (rc == NVML_ERROR_GPU_IS_LOST && d.signals.empty()) {
        d.signals.push_back({Severity::kFatal, absl::StrCat("GPU is lost (", call, ")"), "nvml"});
      }
    };
    if (nvmlReturn_t rc = nvml_.nvmlDeviceGetHandleByIndex_v2(i, &handle); rc != NVML_SUCCESS) {
      fail("nvmlDeviceGetHandleByIndex_v2", rc);
      devices.push_back(std::move(d));
      handles.push_back(nullptr);
      continue;
    }
    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (nvmlReturn_t rc = nvml_.nvmlDeviceGetUUID(handle, buf, sizeof(buf)); rc == NVML_SUCCESS) {
      d.uuid = buf;
    } else {
      fail("nvmlDeviceGetUUID", rc);
    }
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
    if (nvmlReturn_t rc = nvml_.nvmlDeviceGetName(handle, name, sizeof(name)); rc == NVML_SUCCESS) {
      d.model = name;
    } else {
      fail("nvmlDeviceGetName", rc);
    }
    nvmlMemory_t memory{};
    if (nvmlReturn_t rc = nvml_.nvmlDeviceGetMemoryInfo(handle, &memory); rc == NVML_SUCCESS) {
      d.memory_mib = memory.total >> 20;
      d.memory_used_mib = memory.used >> 20;
    } else {
      fail("nvmlDeviceGetMemoryInfo", rc);
    }
    nvmlPciInfo_t pci{};
    if (nvmlReturn_t rc = nvml_.nvmlDeviceGetPciInfo_v3(handle, &pci); rc == NVML_SUCCESS) {
      d.pci_bus_id = CanonicalBusId(pci.busId);
    } else {
      fail("nvmlDeviceGetPciInfo_v3", rc);
    }
    int major = 0, minor = 0;
    if (nvmlReturn_t rc = nvml_.nvmlDeviceGetCudaComputeCapability(handle, &major, &minor); rc == NVML_SUCCESS) {
      d.capability.arch_major = major;
      d.capability.arch_minor = minor;
      d.architecture = absl::StrCat("sm_", major, minor);
    } else {
      fail("nvmlDeviceGetCudaComputeCapability", rc);
    }
    unsigned int numa = 0;
    if (nvml_.nvmlDeviceGetNumaNodeId && nvml_.nvmlDeviceGetNumaNodeId(handle, &numa) == NVML_SUCCESS) {
      d.numa_node = static_cast<int>(numa);
    }
    // The card's device file is /dev/nvidia<minor> (nvidiactl and nvidia-uvm serve every card).
    unsigned int device_minor = 0;
    if (nvml_.nvmlDeviceGetMinorNumber && nvml_.nvmlDeviceGetMinorNumber(handle, &device_minor) == NVML_SUCCESS) {
      d.device_nodes.push_back(absl::StrCat("/dev/nvidia", device_minor));
    }
    char serial[64] = {};
    if (nvml_.nvmlDeviceGetSerial && nvml_.nvmlDeviceGetSerial(handle, serial, sizeof(serial)) == NVML_SUCCESS) {
      d.serial = serial;
    }
    nvmlUtilization_t util{};
    if (nvml_.nvmlDeviceGetUtilizationRates && nvml_.nvmlDeviceGetUtilizationRates(handle, &util) == NVML_SUCCESS) {
      d.utilization_percent = static_cast<int>(util.gpu);
    }
    if (nvml_.nvmlDeviceGetComputeRunningProcesses_v3) d.processes = ComputeProcesses(handle);
    AddHealthSignals(handle, d);
    devices.push_back(std::move(d));
    handles.push_back(handle);
  }

  // NVLink: a lane whose remote end is another GPU links the two directly; a lane ending at a
  // device that is not one of our GPUs ends at an NVSwitch, and GPUs on the same switches reach
  // each other over all their lanes (how nvidia-smi shows NV18 on HGX boards). The same walk over
  // the active links reads their recovery errors (a link that had to retrain: the card degraded).
  std::map<std::string, size_t> by_bus;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (!devices[i].pci_bus_id.empty()) by_bus[devices[i].pci_bus_id] = i;
  }
  std::vector<std::map<std::string, int>> switch_lanes(devices.size());
  if (nvml_.nvmlDeviceGetNvLinkState && nvml_.nvmlDeviceGetNvLinkRemotePciInfo_v2) {
    for (size_t i = 0; i < devices.size(); ++i) {
      if (handles[i] == nullptr || !devices[i].healthy) continue;
      unsigned long long recoveries = 0;
      std::vector<std::string> recovered_links;
      for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
        nvmlEnableState_t active = 0;
        if (nvml_.nvmlDeviceGetNvLinkState(handles[i], link, &active) != NVML_SUCCESS || !active) continue;
        unsigned long long recovered = 0;
        if (nvml_.nvmlDeviceGetNvLinkErrorCounter &&
            nvml_.nvmlDeviceGetNvLinkErrorCounter(handles[i], link, NVML_NVLINK_ERROR_DL_RECOVERY, &recovered) ==
                NVML_SUCCESS &&
            recovered > 0) {
          recoveries += recovered;
          recovered_links.push_back(absl::StrCat(link));
        }
        nvmlPciInfo_t remote{};
        if (nvml_.nvmlDeviceGetNvLinkRemotePciInfo_v2(handles[i], link, &remote) != NVML_SUCCESS) continue;
        const std::string bus = CanonicalBusId(remote.busId);
        if (auto peer = by_bus.find(bus); peer != by_bus.end() && peer->second != i) {
          AddFabricLane(devices[i], devices[peer->second].id, LinkKind::kNvLink);
        } else {
          ++switch_lanes[i][bus];
        }
      }
      if (auto s = SignalOfNvLinkRecoveries(recoveries, recovered_links)) devices[i].signals.push_back(std::move(*s));
    }
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    for (size_t j = 0; j < devices.size(); ++j) {
      if (i == j) continue;
      int lanes = 0;
      for (const auto& [sw, n] : switch_lanes[i]) {
        if (switch_lanes[j].contains(sw)) lanes += n;
      }
      if (lanes > 0) devices[i].links.push_back({devices[j].id, LinkKind::kNvLink, lanes});
    }
  }
  if (nvml_.nvmlDeviceGetTopologyCommonAncestor) {
    AddPcieLinks(devices, [&](size_t i, size_t j) -> std::optional<LinkKind> {
      if (handles[i] == nullptr || handles[j] == nullptr) return std::nullopt;
      nvmlGpuTopologyLevel_t level = 0;
      if (nvml_.nvmlDeviceGetTopologyCommonAncestor(handles[i], handles[j], &level) != NVML_SUCCESS) {
        return std::nullopt;
      }
      return FromTopologyLevel(level);
    });
  }
  return devices;
}

}  // namespace hetpool::drivers
