// Faults through the real dlopen path: a vendor call that fails marks that device unhealthy with
// the vendor's error string; a card that falls off the bus disappears from the backend and turns
// unhealthy in the tracked inventory; an incomplete library fails its backend only; a missing one
// means "no devices of that vendor".
#include <atomic>
#include <filesystem>
#include <fstream>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "drivers/collectives/collective_probe.h"
#include "drivers/inventory_json.h"
#include "drivers/inventory_tracker.h"
#include "drivers/nvml/nvml_abi.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/eventually.h"
#include "tests/testing/fake_vendor.h"
#include "tests/testing/temp_dir.h"

namespace hetpool::drivers {
namespace {

TEST(BackendFaults, FailingCallMarksOnlyThatDeviceUnhealthyWithTheVendorError) {
  testing::UseFakeVendorLibraries("dgx-h100");
  auto backend = testing::LoadBackend("nvml");
  ASSERT_TRUE(backend.ok()) << backend.status();
  testing::FakeControl control("libnvidia-ml.so.1");
  ASSERT_TRUE(control.loaded());
  // Count, handle 0 succeed; device 0's UUID call fails with GPU_IS_LOST.
  control.FailCalls(2, 1, NVML_ERROR_GPU_IS_LOST);
  auto devices = (*backend)->Discover();
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 8u);
  EXPECT_FALSE((*devices)[0].healthy);
  EXPECT_EQ((*devices)[0].health_message, "nvmlDeviceGetUUID: GPU is lost");
  for (size_t i = 1; i < devices->size(); ++i) EXPECT_TRUE((*devices)[i].healthy) << i;
  control.Reset();
}

// Issue 47, item 2: who holds each card, from each vendor's own process query, however many there
// are (more than the first buffer, so each library's "too short" answer is exercised): NVML's
// nvmlDeviceGetComputeRunningProcesses_v3, CNDev's cndevGetProcessInfo, MXSML's
// mxSmlGetSingleGpuProcess (whose entries list every card a process holds) and Level Zero's
// zesDeviceProcessesGetState.
struct ProcessQueryCase {
  const char* backend;
  const char* fixture;
  size_t devices;
};

class CardProcessQuery : public ::testing::TestWithParam<ProcessQueryCase> {};

// What `backend` discovers over `fixture` (written into `dir`) through its fake library.
absl::StatusOr<std::vector<DeviceRecord>> DiscoverOver(const nlohmann::json& fixture, const testing::TempDir& dir,
                                                       const std::string& backend) {
  const std::string path = dir.path() + "/fixture.json";
  std::ofstream(path) << fixture.dump();
  setenv("HETPOOL_VENDOR_LIB_PATH", HETPOOL_FAKE_LIB_DIR, 1);
  setenv("HETPOOL_FAKE_FIXTURE", path.c_str(), 1);
  auto loaded = testing::LoadBackend(backend);
  if (!loaded.ok()) return loaded.status();
  return (*loaded)->Discover();
}

TEST_P(CardProcessQuery, ListsTheProcessesHoldingEachCard) {
  const ProcessQueryCase& c = GetParam();
  testing::TempDir dir;
  nlohmann::json fixture = nlohmann::json::parse(std::ifstream(testing::FixturePath(c.fixture)));
  for (int pid = 100; pid < 112; ++pid)
    fixture["devices"][1]["processes"].push_back({{"pid", pid}, {"used_memory_mib", pid}});
  auto devices = DiscoverOver(fixture, dir, c.backend);
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), c.devices);
  EXPECT_TRUE((*devices)[0].processes.empty());
  ASSERT_EQ((*devices)[1].processes.size(), 12u);
  EXPECT_EQ((*devices)[1].processes[0].pid, 100);
  EXPECT_EQ((*devices)[1].processes[11].pid, 111);
  // This card's memory only (MXSML's fake lists 512 MiB on card 0 for each process too).
  EXPECT_EQ((*devices)[1].processes[11].memory_mib, 111u);
  EXPECT_TRUE((*devices)[1].dirty.empty());  // whose they are is the agent's to say
}

INSTANTIATE_TEST_SUITE_P(EachVendor, CardProcessQuery,
                         ::testing::Values(ProcessQueryCase{"nvml", "dgx-h100", 8},
                                           ProcessQueryCase{"cndev", "mlu370-x8", 8},
                                           ProcessQueryCase{"mxsml", "metax-c500", 8},
                                           ProcessQueryCase{"levelzero", "intel-max1550", 4}),
                         [](const auto& test) { return std::string(test.param.backend); });

TEST(BackendFaults, FailingEnumerationIsAnErrorNotACrash) {
  testing::UseFakeVendorLibraries("mlu370-x8");
  auto backend = testing::LoadBackend("cndev");
  ASSERT_TRUE(backend.ok()) << backend.status();
  testing::FakeControl control("libcndev.so");
  control.FailCalls(0, 1, 7);  // CNDEV_ERROR_UNKNOWN
  auto devices = (*backend)->Discover();
  EXPECT_EQ(devices.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(std::string(devices.status().message()).find("cndevGetDeviceCount: Unknown error"), std::string::npos)
      << devices.status();
  // The next refresh works again.
  EXPECT_TRUE((*backend)->Discover().ok());
}

TEST(BackendFaults, HotRemovedCardTurnsUnhealthyInTheTrackedInventory) {
  testing::UseFakeVendorLibraries("metax-c500");
  auto backend = testing::LoadBackend("mxsml");
  ASSERT_TRUE(backend.ok()) << backend.status();
  testing::FakeControl control("libmxsml.so");
  control.Reset();
  InventoryTracker tracker;
  NodeInventory first;
  first.devices = *(*backend)->Discover();
  first = tracker.Update(first);
  ASSERT_EQ(first.devices.size(), 8u);
  const std::string removed_uuid = first.devices[2].uuid;

  control.RemoveDevice(2);
  auto after = (*backend)->Discover();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->size(), 7u);  // the library no longer lists it
  NodeInventory second;
  second.devices = *after;
  second = tracker.Update(second);
  ASSERT_EQ(second.devices.size(), 8u);
  for (const auto& d : second.devices) {
    if (d.uuid == removed_uuid) {
      EXPECT_EQ(d.id, "metax2");  // ids stay with the card
      EXPECT_FALSE(d.healthy);
      EXPECT_NE(d.health_message.find("no longer reported"), std::string::npos);
    } else {
      EXPECT_TRUE(d.healthy) << d.id;
      // metax3 is now the library's index 2, but keeps its id; its zone links skip the lost card.
      for (const auto& l : d.links) EXPECT_NE(l.peer_device_id, "metax2") << d.id;
    }
  }
  const auto metax3 = std::find_if(second.devices.begin(), second.devices.end(),
                                   [](const DeviceRecord& d) { return d.id == "metax3"; });
  ASSERT_NE(metax3, second.devices.end());
  EXPECT_EQ(metax3->index, 2);
  control.Reset();
}

TEST(BackendFaults, IncompleteLibraryFailsThatBackendOnlyWithTheSymbolNamed) {
  testing::UseFakeVendorLibraries("dgx-h100", HETPOOL_FAKE_INCOMPLETE_DIR);
  std::string notes;
  BackendOptions options;
  options.names = {"nvml", "cndev"};
  options.note = [&notes](const std::string& line) { notes += line + "\n"; };
  auto backends = CreateBackends(options);
  ASSERT_TRUE(backends.ok());
  EXPECT_TRUE(backends->empty());  // cndev's library is not in that folder either
  EXPECT_NE(notes.find("nvml backend disabled:"), std::string::npos) << notes;
  EXPECT_NE(notes.find("lacks required symbol nvmlDeviceGetMemoryInfo"), std::string::npos) << notes;
  EXPECT_NE(notes.find("no Cambricon devices: cannot load"), std::string::npos) << notes;
}

TEST(BackendFaults, LegacyCndevNamesAreUsedWhenV2IsAbsent) {
  testing::UseFakeVendorLibraries("mlu370-x8", HETPOOL_FAKE_LEGACY_DIR);
  auto backend = testing::LoadBackend("cndev");
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto devices = (*backend)->Discover();
  ASSERT_TRUE(devices.ok());
  ASSERT_EQ(devices->size(), 8u);
  EXPECT_EQ((*devices)[0].memory_mib, 49152u);
  EXPECT_EQ((*devices)[0].pci_bus_id, "0000:1a:00.0");
}

TEST(BackendFaults, MissingLibrariesMeanNoDevicesAndUnknownNamesAreErrors) {
  setenv("HETPOOL_VENDOR_LIB_PATH", "/nonexistent", 1);
  std::string notes;
  BackendOptions options;  // auto
  options.note = [&notes](const std::string& line) { notes += line + "\n"; };
  auto backends = CreateBackends(options);
  ASSERT_TRUE(backends.ok());
  // No vendor library here (libze-dev's real loader may load but finds no driver): one note per
  // vendor, no backend, no failure.
  EXPECT_TRUE(backends->empty()) << notes;
  for (const char* vendor : {"NVIDIA", "Cambricon", "MetaX"}) {
    EXPECT_NE(notes.find(std::string("no ") + vendor + " devices"), std::string::npos) << notes;
  }
  EXPECT_TRUE(notes.find("no Intel devices") != std::string::npos ||
              notes.find("levelzero backend disabled") != std::string::npos)
      << notes;
  options.names = {"cuda"};
  EXPECT_EQ(CreateBackends(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.names = {"sim"};
  EXPECT_EQ(CreateBackends(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BackendFaults, LevelZeroNeedsSysmanEnabledAndGetsIt) {
  unsetenv("ZES_ENABLE_SYSMAN");
  testing::UseFakeVendorLibraries("intel-max1550");
  auto backend = testing::LoadBackend("levelzero");
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_STREQ(getenv("ZES_ENABLE_SYSMAN"), "1");
  auto devices = (*backend)->Discover();
  ASSERT_TRUE(devices.ok());
  EXPECT_EQ(devices->size(), 4u);
}

}  // namespace
}  // namespace hetpool::drivers

namespace hetpool::drivers {
namespace {

// FlagCX is found like a vendor library (dlopen, HETPOOL_VENDOR_LIB_PATH first) and reported in
// the inventory; a simulated node may also declare it in its file.
TEST(CollectiveProbe, FlagcxIsReportedWhereItLoadsAndAnswers) {
  setenv("HETPOOL_VENDOR_LIB_PATH", HETPOOL_FAKE_FLAGCX_DIR, 1);
  EXPECT_EQ(DiscoverCollectives(), (std::set<std::string>{"flagcx"}));
  auto inventory = CollectInventory({}, CollectOptions{});
  ASSERT_TRUE(inventory.ok()) << inventory.status();
  EXPECT_EQ(inventory->collectives, (std::set<std::string>{"flagcx"}));
  EXPECT_EQ(InventoryToJson(*inventory)["collectives"], nlohmann::json::array({"flagcx"}));
  CollectOptions quiet;
  quiet.probe_collectives = false;
  EXPECT_TRUE(CollectInventory({}, quiet)->collectives.empty());
  unsetenv("HETPOOL_VENDOR_LIB_PATH");

  auto declared = ParseInventoryJson(R"({"hostname": "sim", "collectives": ["flagcx"], "devices": []})");
  ASSERT_TRUE(declared.ok()) << declared.status();
  EXPECT_TRUE(declared->collectives.contains("flagcx"));
  EXPECT_FALSE(ParseInventoryJson(R"({"collectives": ["nccl"]})").ok());
}

// Issue 61: NVML's health signals through the fake library's real ABI. An Xid 48 or 79 event, an
// uncorrected ECC count and a row-remapping failure each make their card unhealthy with a fatal
// signal; an Xid 13 (the application's) is only noted; a pending remap degrades. The event comes
// through nvmlEventSetWait_v2 on the backend's own thread, which calls back at once.
TEST(BackendFaults, NvmlHealthSignalsGradeXidsAndCountersPerCard) {
  testing::TempDir dir;
  nlohmann::json fixture = nlohmann::json::parse(std::ifstream(testing::FixturePath("dgx-h100")));
  const std::string path = dir.path() + "/health.json";
  std::ofstream(path) << fixture.dump();
  setenv("HETPOOL_VENDOR_LIB_PATH", HETPOOL_FAKE_LIB_DIR, 1);
  setenv("HETPOOL_FAKE_FIXTURE", path.c_str(), 1);
  auto backend = testing::LoadBackend("nvml");
  ASSERT_TRUE(backend.ok()) << backend.status();
  std::atomic<int> calls{0};
  EXPECT_EQ((*backend)->WatchHealth([&] { ++calls; }), "Xid events on 8 of 8 card(s)");
  auto before = (*backend)->Discover();
  ASSERT_TRUE(before.ok()) << before.status();
  for (const auto& d : *before) EXPECT_TRUE(d.healthy && d.signals.empty()) << d.id << ": " << d.health_message;

  // Three Xid 13s: latched once. The fake hands out events card by card, so the card 2 event the
  // wait below sees comes after all of card 0's.
  fixture["devices"][0]["xid_events"] = {13, 13, 13};
  fixture["devices"][1]["xid_events"] = {48};
  fixture["devices"][2]["xid_events"] = {79};
  fixture["devices"][3]["ecc_uncorrected_volatile"] = 2;
  fixture["devices"][4]["rows_remap_failed"] = true;
  fixture["devices"][5]["rows_remap_pending"] = true;
  std::ofstream(path + ".tmp") << fixture.dump();
  std::filesystem::rename(path + ".tmp", path);
  ASSERT_TRUE(testing::Eventually([&] { return calls.load() >= 3; }, absl::Seconds(10))) << calls.load();
  auto after = (*backend)->Discover();
  ASSERT_TRUE(after.ok()) << after.status();
  const auto& d = *after;
  EXPECT_TRUE(d[0].healthy) << d[0].health_message;
  ASSERT_EQ(d[0].signals.size(), 1u);
  EXPECT_EQ(d[0].signals[0].severity, Severity::kNoted);
  EXPECT_EQ(d[1].health_message, "fatal: Xid 48: double-bit ECC error");
  EXPECT_EQ(d[2].health_message, "fatal: Xid 79: GPU has fallen off the bus");
  EXPECT_EQ(d[3].health_message, "fatal: 2 uncorrected ECC error(s) since the driver loaded");
  EXPECT_EQ(d[4].health_message, "fatal: row remapping failed (no spare rows left)");
  EXPECT_TRUE(d[5].healthy);
  ASSERT_EQ(d[5].signals.size(), 1u);
  EXPECT_EQ(d[5].signals[0].severity, Severity::kDegraded);
  for (size_t i = 6; i < d.size(); ++i) EXPECT_TRUE(d[i].healthy && d[i].signals.empty()) << i;
  // Latched: the event is not delivered twice, and the card stays unhealthy.
  auto again = (*backend)->Discover();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)[2].health_message, "fatal: Xid 79: GPU has fallen off the bus");
  EXPECT_EQ((*again)[2].signals.size(), 1u);
}

// Issue 61, item 1: each vendor's own health calls, through its fake library's real ABI, grade a
// card's trouble the same way: fatal (out until reset), degraded (placed last), noted, or nothing.
struct SignalCase {
  const char* backend;
  const char* fixture;
  const char* field;  // set on card 1 of the fixture
  nlohmann::json value;
  Severity severity;
  const char* what;  // "" when the card must raise no signal
};

class VendorHealthSignals : public ::testing::TestWithParam<SignalCase> {};

TEST_P(VendorHealthSignals, GradeTheCardsOwnTrouble) {
  const SignalCase& c = GetParam();
  testing::TempDir dir;
  nlohmann::json fixture = nlohmann::json::parse(std::ifstream(testing::FixturePath(c.fixture)));
  fixture["devices"][1][c.field] = c.value;
  auto devices = DiscoverOver(fixture, dir, c.backend);
  ASSERT_TRUE(devices.ok()) << devices.status();
  const DeviceRecord& card = (*devices)[1];
  EXPECT_TRUE((*devices)[0].signals.empty() && (*devices)[0].healthy) << (*devices)[0].health_message;
  if (std::string(c.what).empty()) {
    EXPECT_TRUE(card.signals.empty()) << card.signals[0].what;
    EXPECT_TRUE(card.healthy);
    return;
  }
  ASSERT_EQ(card.signals.size(), 1u);
  EXPECT_EQ(card.signals[0].severity, c.severity);
  EXPECT_EQ(card.signals[0].what, c.what);
  EXPECT_EQ(card.signals[0].source, c.backend);
  EXPECT_EQ(card.healthy, c.severity != Severity::kFatal);
  if (c.severity == Severity::kFatal) {
    EXPECT_EQ(card.health_message, absl::StrCat("fatal: ", c.what));
  }
}

INSTANTIATE_TEST_SUITE_P(
    EachVendor, VendorHealthSignals,
    ::testing::Values(
        SignalCase{"nvml", "dgx-h100", "pcie_width", 8, Severity::kDegraded, "PCIe link x8 of x16 (Gen5 of Gen5)"},
        SignalCase{"nvml", "dgx-h100", "pcie_generation", 1, Severity::kNoted, ""},  // idle cards slow their link
        SignalCase{"nvml", "dgx-h100", "clock_reasons", 0x40 | 0x4, Severity::kDegraded,
                   "clocks held down: hardware thermal slowdown"},
        SignalCase{"nvml", "dgx-h100", "clock_reasons", 0x4 | 0x1, Severity::kNoted, ""},  // power cap, idle
        SignalCase{"nvml", "dgx-h100", "nvlink_recoveries", 3, Severity::kDegraded,
                   "NVLink: 3 recovery error(s) on link(s) 0"},
        SignalCase{"nvml", "dgx-h100", "retired_pages_pending", true, Severity::kDegraded,
                   "retired pages pending: the card needs a reset"},
        SignalCase{"cndev", "mlu370-x8", "problem", "x", Severity::kFatal,
                   "device in problem (cndevGetCardHealthState)"},
        SignalCase{"cndev", "mlu370-x8", "ecc_uncorrected_volatile", 4, Severity::kFatal,
                   "4 uncorrected ECC error(s) since the driver loaded"},
        SignalCase{"cndev", "mlu370-x8", "rows_remap_failed", true, Severity::kFatal,
                   "row remapping failed (no spare rows left)"},
        SignalCase{"cndev", "mlu370-x8", "rows_remap_pending", true, Severity::kDegraded,
                   "row remapping pending: the card needs a reset"},
        SignalCase{"cndev", "mlu370-x8", "retired_pages_failed", true, Severity::kFatal, "page retirement failed"},
        SignalCase{"mxsml", "metax-c500", "problem", "PCIe link lost", Severity::kFatal,
                   "unavailable (code 1: PCIe link lost)"},
        SignalCase{"mxsml", "metax-c500", "ecc_uncorrected_volatile", 1, Severity::kFatal,
                   "1 uncorrected ECC error(s) since the driver loaded"},
        SignalCase{"mxsml", "metax-c500", "retired_pages", 3, Severity::kNoted, "3 page(s) retired"},
        SignalCase{"mxsml", "metax-c500", "pcie_width", 4, Severity::kDegraded, "PCIe link x4 of x16 (Gen5 of Gen5)"},
        SignalCase{"levelzero", "intel-max1550", "problem", "x", Severity::kFatal,
                   "reset required: the hardware is wedged"},
        SignalCase{"levelzero", "intel-max1550", "rows_remap_pending", true, Severity::kDegraded,
                   "reset required to complete a repair"},
        SignalCase{"levelzero", "intel-max1550", "ecc_uncorrected_volatile", 2, Severity::kFatal,
                   "2 uncorrectable RAS error(s)"},
        SignalCase{"levelzero", "intel-max1550", "memory_health", "replace", Severity::kFatal,
                   "memory: replace the card (uncorrectable errors)"},
        SignalCase{"levelzero", "intel-max1550", "memory_health", "degraded", Severity::kDegraded,
                   "memory: excessive correctable errors"},
        SignalCase{"levelzero", "intel-max1550", "pcie_width", 8, Severity::kDegraded,
                   "PCIe link x8 of x16 (Gen5 of Gen5)"}),
    [](const ::testing::TestParamInfo<SignalCase>& param_info) {
      return absl::StrCat(param_info.param.backend, "_", param_info.param.field, "_", param_info.index);
    });

}  // namespace
}  // namespace hetpool::drivers
