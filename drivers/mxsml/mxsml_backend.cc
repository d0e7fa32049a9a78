#include "drivers/mxsml/mxsml_backend.h"

#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "drivers/device_links.h"
#include "drivers/health_signals.h"
#include "drivers/vendor_c_abi.h"

namespace hetpool::drivers {
namespace {

constexpr int kUsageXcore = 4;  // mxSmlUsageIp_t MXSML_Usage_Xcore (C-class devices)

LinkKind FromMxsmlTopologyLevel(mxSmlDeviceTopologyLevel_t level) {
  if (level <= 2) return LinkKind::kPcieSwitch;
  if (level == 3) return LinkKind::kPcieHostBridge;
  if (level == 4) return LinkKind::kSameNuma;
  return LinkKind::kCrossSocket;  // 6 SYSTEM (5 METAXLINK is reported as a fabric link instead)
}

// MXSML reports a link's speed in GT/s; hetpool's signal speaks of PCIe generations.
int PcieGeneration(float gigatransfers) {
  constexpr float kSpeeds[] = {2.5f, 5, 8, 16, 32, 64};
  for (int g = 0; g < 6; ++g) {
    if (gigatransfers <= kSpeeds[g] + 0.1f) return g + 1;
  }
  return 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MxsmlBackend>> MxsmlBackend::Load(const std::vector<std::string>& candidates) {
  auto loaded = OpenVendorLibrary<EntryPoints>(candidates, [](const DynamicLibrary& lib, EntryPoints& t) {
    HETPOOL_MXSML_REQUIRED(HETPOOL_REQUIRE_ENTRY_POINT)
    HETPOOL_MXSML_OPTIONAL(HETPOOL_OPTIONAL_ENTRY_POINT)
    return absl::OkStatus();
  });
  if (!loaded.ok()) return loaded.status();
  auto& [library, t] = *loaded;
  if (mxSmlReturn_t rc = t.mxSmlInit(); rc != MXSML_SUCCESS) {
    return absl::UnavailableError(absl::StrCat("mxSmlInit: ", t.mxSmlGetErrorString(rc)));
  }
  return std::unique_ptr<MxsmlBackend>(new MxsmlBackend(std::move(library), t));
}

std::string MxsmlBackend::Error(mxSmlReturn_t rc) const {
  const char* text = mxsml_.mxSmlGetErrorString(rc);
  return text ? text : absl::StrCat("MXSML error ", rc);
}

std::vector<CardProcess> MxsmlBackend::Processes(unsigned index, unsigned gpu_id) const {
  // Each entry is one process with every card it holds; this card's share is the one whose gpuId
  // is the card's. A failing call (no such symbol behaviour is documented) counts as unknown.
  const auto infos = ReadVendorList(mxSmlProcessInfo_t{}, [&](uint32_t* count, mxSmlProcessInfo_t* buffer) {
    return mxsml_.mxSmlGetSingleGpuProcess(index, count, buffer) == MXSML_SUCCESS ? VendorListRead::kDone
                                                                                  : VendorListRead::kFailed;
  });
  std::vector<CardProcess> out;
  for (const auto& info : infos) {
    uint64_t bytes = 0;
    const unsigned cards = std::min<unsigned>(info.gpuNumber, MXSML_MAX_GPU_NUM_USED_BY_PROCESS);
    for (unsigned c = 0; c < cards; ++c) {
      if (info.processGpuInfo[c].gpuId == gpu_id) bytes += info.processGpuInfo[c].gpuMemoryUsage;
    }
    out.push_back({static_cast<int>(info.processId), bytes >> 20, ""});
  }
  return out;
}

void MxsmlBackend::AddHealthSignals(unsigned index, DeviceRecord& d) const {
  mxSmlDeviceUnavailableReasonInfo_t unavailable{};
  if (mxsml_.mxSmlGetDeviceUnavailableReason &&
      mxsml_.mxSmlGetDeviceUnavailableReason(index, &unavailable) == MXSML_SUCCESS &&
      unavailable.unavailableCode != 0) {
    const std::string why = Bounded(unavailable.unavailableReason, sizeof(unavailable.unavailableReason));
    d.signals.push_back(
        {Severity::kFatal,
         absl::StrCat("unavailable (code ", unavailable.unavailableCode, why.empty() ? "" : ": ", why, ")"), "mxsml"});
  }
  MemoryHealth memory;
  mxSmlEccErrorCount_t ecc{};
  if (mxsml_.mxSmlGetTotalEccErrors && mxsml_.mxSmlGetTotalEccErrors(index, &ecc) == MXSML_SUCCESS) {
    memory.uncorrected_errors = uint64_t{ecc.sramUE} + ecc.dramUE;
    memory.retired_pages = ecc.retiredPage;
  }
  for (HealthSignal& s : SignalsOfMemory(memory, "mxsml")) d.signals.push_back(std::move(s));
  mxSmlPcieInfo_t now{}, most{};
  if (mxsml_.mxSmlGetPcieInfo && mxsml_.mxSmlGetPcieMaxLinkInfo &&
      mxsml_.mxSmlGetPcieInfo(index, &now) == MXSML_SUCCESS &&
      mxsml_.mxSmlGetPcieMaxLinkInfo(index, &most) == MXSML_SUCCESS) {
    const PcieLinkHealth link{static_cast<int>(now.width), static_cast<int>(most.width), PcieGeneration(now.speed),
                              PcieGeneration(most.speed)};
    if (auto s = SignalOfPcieLink(link, "mxsml")) d.signals.push_back(std::move(*s));
  }
  MarkUnhealthyOnFatal(d);
}

absl::StatusOr<std::vector<DeviceRecord>> MxsmlBackend::Discover() {
  const unsigned count = mxsml_.mxSmlGetDeviceCount();
  std::string maca_version;
  if (mxsml_.mxSmlGetMacaVersion) {
    char buf[64] = {};
    unsigned size = sizeof(buf);
    if (mxsml_.mxSmlGetMacaVersion(buf, &size) == MXSML_SUCCESS) maca_version = Bounded(buf, sizeof(buf));
  }
  std::vector<DeviceRecord> devices;
  std::vector<bool> answered;  // device info known (links and topology are asked only then)
  std::map<unsigned, size_t> by_device_id;
  for (unsigned i = 0; i < count; ++i) {
    DeviceRecord d;
    d.vendor = Vendor::kMetax;
    d.index = static_cast<int>(i);
    d.id = absl::StrCat("metax", i);
    d.capability.runtime_version = maca_version;
    auto fail = [&d, this](const char* call, mxSmlReturn_t rc) {
      if (d.healthy) d.health_message = absl::StrCat(call, ": ", Error(rc));
      d.healthy = false;
    };
    mxSmlDeviceInfo_t info{};
    const mxSmlReturn_t info_rc = mxsml_.mxSmlGetDeviceInfo(i, &info);
    if (info_rc == MXSML_SUCCESS) {
      d.uuid = Bounded(info.uuid, sizeof(info.uuid));
      d.model = Bounded(info.deviceName, sizeof(info.deviceName));
      d.pci_bus_id = CanonicalBusId(Bounded(info.bdfId, sizeof(info.bdfId)));
      by_device_id[info.deviceId] = devices.size();
    } else {
      fail("mxSmlGetDeviceInfo", info_rc);
    }
    mxSmlMemoryInfo_t memory{};
    if (mxSmlReturn_t rc = mxsml_.mxSmlGetMemoryInfo(i, &memory); rc == MXSML_SUCCESS) {
      d.memory_mib = static_cast<uint64_t>(memory.vramTotal) / 1024;
      d.memory_used_mib = static_cast<uint64_t>(memory.vramUse) / 1024;
    } else {
      fail("mxSmlGetMemoryInfo", rc);
    }
    int isa = 0;
    if (mxsml_.mxSmlGetDeviceIsaVersion && mxsml_.mxSmlGetDeviceIsaVersion(i, &isa) == MXSML_SUCCESS && isa > 0) {
      d.architecture = absl::StrCat("xcore", isa);
      d.capability.arch_major = isa;
    }
    int usage = 0;
    if (mxsml_.mxSmlGetDeviceIpUsage && mxsml_.mxSmlGetDeviceIpUsage(i, kUsageXcore, &usage) == MXSML_SUCCESS) {
      d.utilization_percent = usage;
    }
    if (info_rc == MXSML_SUCCESS && mxsml_.mxSmlGetSingleGpuProcess) d.processes = Processes(i, info.gpuId);
    AddHealthSignals(i, d);
    devices.push_back(std::move(d));
    answered.push_back(info_rc == MXSML_SUCCESS);
  }
  if (mxsml_.mxSmlGetMetaXLinkRemoteInfo) {
    for (size_t i = 0; i < devices.size(); ++i) {
      if (!answered[i] || !devices[i].healthy) continue;
      for (unsigned link = 0; link < MXSML_METAXLINK_MAX_LINKS; ++link) {
        mxSmlMetaXLinkRemoteInfo_t remote{};
        if (mxsml_.mxSmlGetMetaXLinkRemoteInfo(static_cast<unsigned>(i), link, &remote) != MXSML_SUCCESS) continue;
        auto peer = by_device_id.find(remote.deviceId);
        if (peer != by_device_id.end() && peer->second != i) {
          AddFabricLane(devices[i], devices[peer->second].id, LinkKind::kMetaxLink);
        }
      }
    }
  }
  if (mxsml_.mxSmlGetDeviceTopology) {
    AddPcieLinks(devices, [&](size_t i, size_t j) -> std::optional<LinkKind> {
      if (!answered[i] || !answered[j]) return std::nullopt;
      mxSmlDeviceTopologyLevel_t level = 0;
      if (mxsml_.mxSmlGetDeviceTopology(static_cast<unsigned>(i), static_cast<unsigned>(j), &level) != MXSML_SUCCESS) {
        return std::nullopt;
      }
      return FromMxsmlTopologyLevel(level);
    });
  }
  return devices;
}

}  // namespace hetpool::drivers
