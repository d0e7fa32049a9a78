// One conformance suite for every discovery backend: each vendor backend goes through the real
// dlopen path into its fake library and must report its fixture faithfully (ids, memory, bus ids,
// NUMA, fabric links with lane counts, PCIe relationships, architecture, one fingerprint per card
// model); the sim backend must meet the same contract for its JSON inventory.
#include <fstream>
#include <map>
#include <set>

#include "drivers/backend_factory.h"
#include "drivers/fingerprint/fingerprint.h"
#include "drivers/sim/sim_backend.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/fake_vendor.h"

namespace hetpool::drivers {
namespace {

struct BackendCase {
  std::string backend;
  std::string fixture;
  Vendor vendor;
  LinkKind fabric;
  std::string architecture;
  bool reports_numa = true;  // Level Zero leaves NUMA to sysfs
  bool reports_pcie = true;  // Level Zero has no PCIe distance call
  bool nvswitch = false;     // lanes end at switches: every pair links with all lanes
};

std::ostream& operator<<(std::ostream& os, const BackendCase& c) { return os << c.backend << "/" << c.fixture; }

LinkKind ExpectedPcie(const nlohmann::json& a, const nlohmann::json& b) {
  if (a["pcie_switch"] == b["pcie_switch"]) return LinkKind::kPcieSwitch;
  if (a["host_bridge"] == b["host_bridge"]) return LinkKind::kPcieHostBridge;
  if (a["socket"] == b["socket"]) return LinkKind::kSameNuma;
  return LinkKind::kCrossSocket;
}

const Link* LinkTo(const DeviceRecord& d, const std::string& peer) {
  for (const auto& l : d.links) {
    if (l.peer_device_id == peer) return &l;
  }
  return nullptr;
}

class ConformanceTest : public ::testing::TestWithParam<BackendCase> {};

TEST_P(ConformanceTest, ReportsTheFixtureFaithfully) {
  const BackendCase& c = GetParam();
  testing::UseFakeVendorLibraries(c.fixture);
  std::string notes;
  auto backend = testing::LoadBackend(c.backend, &notes);
  ASSERT_TRUE(backend.ok()) << backend.status() << notes;
  EXPECT_FALSE((*backend)->Simulated());
  auto devices = (*backend)->Discover();
  ASSERT_TRUE(devices.ok()) << devices.status();
  std::ifstream in(testing::FixturePath(c.fixture));
  const auto fixture = nlohmann::json::parse(in)["devices"];
  ASSERT_EQ(devices->size(), fixture.size());

  const SpecTable specs = SpecTable::Defaults();
  std::set<std::string> ids, uuids, fingerprints;
  for (size_t i = 0; i < devices->size(); ++i) {
    DeviceRecord& d = (*devices)[i];
    const auto& f = fixture[i];
    SCOPED_TRACE(d.id);
    EXPECT_TRUE(d.healthy) << d.health_message;
    EXPECT_EQ(d.vendor, c.vendor);
    EXPECT_EQ(d.id, std::string(VendorName(c.vendor)) + std::to_string(i));
    EXPECT_EQ(d.index, static_cast<int>(i));
    EXPECT_EQ(d.model, f["name"]);
    EXPECT_EQ(d.memory_mib, f["memory_mib"].get<uint64_t>());
    EXPECT_EQ(d.memory_used_mib, f["memory_used_mib"].get<uint64_t>());
    EXPECT_EQ(d.pci_bus_id, f["pci_bus_id"]);
    if (c.reports_numa) {
      EXPECT_EQ(d.numa_node, f["numa_node"].get<int>());
    }
    EXPECT_FALSE(d.uuid.empty());
    ids.insert(d.id);
    uuids.insert(d.uuid);
    ApplyFingerprint(specs, d);
    EXPECT_EQ(d.architecture, c.architecture);
    fingerprints.insert(d.fingerprint);
  }
  EXPECT_EQ(ids.size(), devices->size());
  EXPECT_EQ(uuids.size(), devices->size());
  EXPECT_EQ(fingerprints.size(), 1u) << "identical cards must share a fingerprint";

  for (size_t i = 0; i < devices->size(); ++i) {
    for (size_t j = 0; j < devices->size(); ++j) {
      if (i == j) continue;
      const Link* link = LinkTo((*devices)[i], (*devices)[j].id);
      const Link* back = LinkTo((*devices)[j], (*devices)[i].id);
      SCOPED_TRACE((*devices)[i].id + " -> " + (*devices)[j].id);
      int lanes = 0;
      for (const auto& l : fixture[i]["links"]) {
        if (l.value("peer", -1) == static_cast<int>(j)) lanes += l["lanes"].get<int>();
      }
      if (c.nvswitch) lanes = 18;
      if (lanes > 0) {
        ASSERT_NE(link, nullptr);
        EXPECT_EQ(link->kind, c.fabric);
        EXPECT_EQ(link->count, lanes);
        ASSERT_NE(back, nullptr);
        EXPECT_EQ(back->count, lanes);  // symmetric
      } else if (c.reports_pcie) {
        ASSERT_NE(link, nullptr);
        EXPECT_EQ(link->kind, ExpectedPcie(fixture[i], fixture[j]));
      } else {
        EXPECT_EQ(link, nullptr);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Vendors, ConformanceTest,
    ::testing::Values(BackendCase{"nvml", "dgx-h100", Vendor::kNvidia, LinkKind::kNvLink, "sm_90", true, true, true},
                      BackendCase{"nvml", "a100-pcie-pairs", Vendor::kNvidia, LinkKind::kNvLink, "sm_80"},
                      BackendCase{"cndev", "mlu370-x8", Vendor::kCambricon, LinkKind::kMluLink, "mtp_372"},
                      BackendCase{"mxsml", "metax-c500", Vendor::kMetax, LinkKind::kMetaxLink, "xcore1000", false},
                      BackendCase{"levelzero", "intel-max1550", Vendor::kIntel, LinkKind::kXeLink, "pvc", false,
                                  false}),
    [](const ::testing::TestParamInfo<BackendCase>& param_info) {
      std::string name = param_info.param.backend + "_" + param_info.param.fixture;
      for (char& ch : name) {
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return name;
    });

// The sim backend meets the same contract for its JSON inventory.
TEST(SimConformance, ReportsItsInventory) {
  SimBackend sim(std::string(HETPOOL_SOURCE_DIR_FOR_TESTS) + "/deploy/examples/node-a.json");
  EXPECT_TRUE(sim.Simulated());
  auto devices = sim.Discover();
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 4u);
  std::set<std::string> ids;
  for (auto& d : *devices) {
    ids.insert(d.id);
    EXPECT_GT(d.memory_mib, 0u);
    EXPECT_TRUE(d.healthy);
    for (const auto& l : d.links) {
      bool known = false;
      for (const auto& other : *devices) known |= other.id == l.peer_device_id;
      EXPECT_TRUE(known) << l.peer_device_id;
    }
  }
  EXPECT_EQ(ids.size(), 4u);
  EXPECT_EQ((*devices)[0].links[0].kind, LinkKind::kNvLink);
}

}  // namespace
}  // namespace hetpool::drivers
