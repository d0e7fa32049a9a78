// A fake libmxsml.so: MXSML's C ABI (drivers/mxsml/mxsml_abi.h) over a JSON fixture.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "drivers/mxsml/mxsml_abi.h"
#include "tests/fakes/fake_fixture.h"

using hetpool::fakes::FakeDevice;
using hetpool::fakes::Fixture;

#define EXPORT __attribute__((visibility("default")))

namespace {

bool g_initialized = false;

// MXSML addresses devices by enumeration index; map it to the fixture index.
mxSmlReturn_t Check(unsigned index, FakeDevice** out, int* fixture_index = nullptr) {
  if (!g_initialized) return MXSML_FAILURE;
  if (int rc = hetpool::fakes::TakeInjectedError()) return static_cast<mxSmlReturn_t>(rc);
  auto visible = hetpool::fakes::VisibleDevices();
  if (index >= visible.size()) return MXSML_NO_DEVICE;
  *out = &Fixture()->devices[visible[index]];
  if (fixture_index) *fixture_index = visible[index];
  return MXSML_SUCCESS;
}

int VisibleIndexOf(int fixture_index) {
  auto visible = hetpool::fakes::VisibleDevices();
  for (size_t i = 0; i < visible.size(); ++i) {
    if (visible[i] == fixture_index) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

extern "C" {

EXPORT mxSmlReturn_t mxSmlInit(void) {
  if (hetpool::fakes::FixtureFor("metax") == nullptr) return MXSML_FAILURE;
  g_initialized = true;
  return MXSML_SUCCESS;
}

EXPORT unsigned int mxSmlGetDeviceCount(void) {
  return g_initialized ? static_cast<unsigned>(hetpool::fakes::VisibleDevices().size()) : 0;
}

EXPORT const char* mxSmlGetErrorString(mxSmlReturn_t rc) {
  switch (rc) {
    case MXSML_SUCCESS: return "Success";
    case MXSML_NO_DEVICE: return "No device";
    case MXSML_DEVICE_LOST: return "Device lost";
    default: return "Failure";
  }
}

EXPORT mxSmlReturn_t mxSmlGetDeviceInfo(unsigned int index, mxSmlDeviceInfo_t* info) {
  FakeDevice* d = nullptr;
  int fixture_index = 0;
  if (mxSmlReturn_t rc = Check(index, &d, &fixture_index)) return rc;
  std::memset(info, 0, sizeof(*info));
  info->deviceId = index;
  info->gpuId = static_cast<unsigned>(fixture_index);
  info->nodeId = static_cast<unsigned>(d->numa_node < 0 ? 0 : d->numa_node);
  info->brand = 2;
  std::strncpy(info->bdfId, d->pci_bus_id.c_str(), sizeof(info->bdfId) - 1);
  std::strncpy(info->uuid, d->uuid.c_str(), sizeof(info->uuid) - 1);
  std::strncpy(info->deviceName, d->name.c_str(), sizeof(info->deviceName) - 1);
  return MXSML_SUCCESS;
}

EXPORT mxSmlReturn_t mxSmlGetMemoryInfo(unsigned int index, mxSmlMemoryInfo_t* memory) {
  FakeDevice* d = nullptr;
  if (mxSmlReturn_t rc = Check(index, &d)) return rc;
  std::memset(memory, 0, sizeof(*memory));
  memory->vramTotal = static_cast<long>(d->memory_mib * 1024);
  memory->vramUse = static_cast<long>(d->memory_used_mib * 1024);
  return MXSML_SUCCESS;
}

// Each process is listed with every card it holds; a process on this card also holds fixture card
// 0 (when this card is not card 0), so the backend must pick this card's share by gpuId. MXSML's
// behaviour on a short buffer is undocumented: this fake fills what fits and says how many there
// are, the case the backend must not read past.
EXPORT mxSmlReturn_t mxSmlGetSingleGpuProcess(unsigned int index, unsigned int* count, mxSmlProcessInfo_t* infos) {
  FakeDevice* d = nullptr;
  int fixture_index = 0;
  if (mxSmlReturn_t rc = Check(index, &d, &fixture_index)) return rc;
  const size_t fits = std::min<size_t>(*count, d->processes.size());
  for (size_t i = 0; i < fits; ++i) {
    std::memset(&infos[i], 0, sizeof(infos[i]));
    infos[i].processId = static_cast<unsigned>(d->processes[i].first);
    std::strncpy(infos[i].processName, "python3", sizeof(infos[i].processName) - 1);
    unsigned n = 0;
    if (fixture_index != 0) infos[i].processGpuInfo[n++] = {{}, 0u, 512ul << 20};
    infos[i].processGpuInfo[n++] = {
        {}, static_cast<unsigned>(fixture_index), static_cast<unsigned long>(d->processes[i].second << 20)};
    infos[i].gpuNumber = n;
  }
  *count = static_cast<unsigned>(d->processes.size());
  return MXSML_SUCCESS;
}

EXPORT mxSmlReturn_t mxSmlGetMacaVersion(char* version, unsigned int* size) {
  if (!g_initialized) return MXSML_FAILURE;
  return hetpool::fakes::CopyString(Fixture()->runtime_version, version, *size) ? MXSML_SUCCESS : MXSML_FAILURE;
}

EXPORT mxSmlReturn_t mxSmlGetDeviceIsaVersion(unsigned int index, int* isa) {
  FakeDevice* d = nullptr;
  if (mxSmlReturn_t rc = Check(index, &d)) return rc;
  *isa = d->arch_major;
  return MXSML_SUCCESS;
}

EXPORT mxSmlReturn_t mxSmlGetDeviceIpUsage(unsigned int index, int, int* usage) {
  FakeDevice* d = nullptr;
  if (mxSmlReturn_t rc = Check(index, &d)) return rc;
  *usage = d->utilization;
  return MXSML_SUCCESS;
}

EXPORT mxSmlReturn_t mxSmlGetDeviceTopology(unsigned int a, unsigned int b, mxSmlDeviceTopologyLevel_t* level) {
  FakeDevice *da = nullptr, *db = nullptr;
  if (mxSmlReturn_t rc = Check(a, &da)) return rc;
  if (mxSmlReturn_t rc = Check(b, &db)) return rc;
  static const int kLevels[] = {0, 1, 3, 4, 6};
  *level = a == b ? 0 : kLevels[hetpool::fakes::PcieDistance(*da, *db)];
  return MXSML_SUCCESS;
}

EXPORT mxSmlReturn_t mxSmlGetMetaXLinkRemoteInfo(unsigned int index, unsigned int link,
                                                 mxSmlMetaXLinkRemoteInfo_t* remote) {
  FakeDevice* d = nullptr;
  if (mxSmlReturn_t rc = Check(index, &d)) return rc;
  unsigned lane = 0;
  for (const auto& l : d->links) {
    for (int k = 0; k < l.lanes; ++k, ++lane) {
      if (lane != link) continue;
      const int peer = VisibleIndexOf(l.peer);
      if (peer < 0) return MXSML_FAILURE;  // the far end fell off the bus
      remote->deviceId = static_cast<unsigned>(peer);
      std::strncpy(remote->bdfId, Fixture()->devices[l.peer].pci_bus_id.c_str(), sizeof(remote->bdfId) - 1);
      return MXSML_SUCCESS;
    }
  }
  return MXSML_FAILURE;
}

EXPORT mxSmlReturn_t mxSmlGetTotalEccErrors(unsigned int index, mxSmlEccErrorCount_t* counts) {
  FakeDevice* d = nullptr;
  if (mxSmlReturn_t rc = Check(index, &d)) return rc;
  std::memset(counts, 0, sizeof(*counts));
  counts->dramUE = static_cast<unsigned>(d->ecc_uncorrected_volatile);
  counts->retiredPage = static_cast<unsigned>(d->retired_pages);
  return MXSML_SUCCESS;
}

EXPORT mxSmlReturn_t mxSmlGetDeviceUnavailableReason(unsigned int index, mxSmlDeviceUnavailableReasonInfo_t* info) {
  FakeDevice* d = nullptr;
  if (mxSmlReturn_t rc = Check(index, &d)) return rc;
  std::memset(info, 0, sizeof(*info));
  info->unavailableCode = d->problem.empty() ? 0 : 1;
  std::strncpy(info->unavailableReason, d->problem.c_str(), sizeof(info->unavailableReason) - 1);
  return MXSML_SUCCESS;
}

namespace {

// Speed in GT/s per PCIe generation (1: 2.5 ... 5: 32).
float GigaTransfers(int generation) {
  static const float kSpeed[] = {0, 2.5f, 5, 8, 16, 32, 64};
  return generation >= 0 && generation <= 6 ? kSpeed[generation] : 0;
}

// The card's PCIe link now (`most` false) or at most.
mxSmlReturn_t PcieLink(unsigned int index, mxSmlPcieInfo_t* pcie, bool most) {
  FakeDevice* d = nullptr;
  if (mxSmlReturn_t rc = Check(index, &d)) return rc;
  pcie->speed = GigaTransfers(most ? d->pcie_max_generation : d->pcie_generation);
  pcie->width = static_cast<unsigned>(most ? d->pcie_max_width : d->pcie_width);
  return MXSML_SUCCESS;
}

}  // namespace

EXPORT mxSmlReturn_t mxSmlGetPcieInfo(unsigned int index, mxSmlPcieInfo_t* pcie) {
  return PcieLink(index, pcie, false);
}

EXPORT mxSmlReturn_t mxSmlGetPcieMaxLinkInfo(unsigned int index, mxSmlPcieInfo_t* pcie) {
  return PcieLink(index, pcie, true);
}

}  // extern "C"
