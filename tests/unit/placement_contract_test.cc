// What every placement keeps, whatever the scores prefer: one vendor per gang, requirements
// honoured, busy cards mean "wait" and impossible shapes "never", unhealthy cards unused. Checked on
// the shipped policy (the default profile), the only one hetpoold runs.
#include "scheduler/framework/profile.h"

#include <algorithm>
#include <set>

#include "gtest/gtest.h"

namespace hetpool::scheduler {
namespace {

DeviceRecord Card(Vendor vendor, int index, uint64_t memory_mib, std::string model = "m") {
  DeviceRecord d;
  d.vendor = vendor;
  d.index = index;
  d.id = std::string(VendorName(vendor)) + std::to_string(index);
  d.memory_mib = memory_mib;
  d.model = std::move(model);
  return d;
}

class PlacementContractTest : public ::testing::Test {
 protected:
  // node-a: 2 nvidia + 2 cambricon; node-b: 2 nvidia + 2 metax.
  void SetUp() override {
    a_ = {Card(Vendor::kNvidia, 0, 80000), Card(Vendor::kNvidia, 1, 80000), Card(Vendor::kCambricon, 0, 48000),
          Card(Vendor::kCambricon, 1, 48000)};
    b_ = {Card(Vendor::kNvidia, 0, 80000), Card(Vendor::kNvidia, 1, 80000), Card(Vendor::kMetax, 0, 64000),
          Card(Vendor::kMetax, 1, 64000)};
  }
  std::vector<NodeView> Views(std::set<std::string> busy = {}) {
    std::vector<NodeView> views;
    for (auto [name, devices] : {std::pair{"node-b", &b_}, std::pair{"node-a", &a_}}) {
      NodeView v{name, true, {}, {{"cuda", "mlu", "xpu", "cpu"}, false}};
      for (const auto& d : *devices) v.devices.push_back({&d, !busy.contains(std::string(name) + "/" + d.id)});
      views.push_back(std::move(v));
    }
    return views;
  }
  std::vector<DeviceRecord> a_, b_;
  std::unique_ptr<Framework> framework_ = DefaultFramework();
  PlacementPolicy& policy_ = *framework_;
};

TEST_F(PlacementContractTest, PlacesAGangOnOneVendor) {
  auto p = policy_.Place({2, 2, {}}, Views());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->vendor, Vendor::kNvidia);  // the only vendor both nodes have two of
  ASSERT_EQ(p->nodes.size(), 2u);
  EXPECT_NE(p->nodes[0].node, p->nodes[1].node);
  for (const auto& n : p->nodes) {
    std::vector<std::string> ids = n.device_ids;
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(ids, (std::vector<std::string>{"nvidia0", "nvidia1"})) << n.node;
  }
}

TEST_F(PlacementContractTest, HonoursVendorAndMemoryRequirements) {
  auto p = policy_.Place({1, 2, {{Vendor::kMetax}, {}, {}}}, Views());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->vendor, Vendor::kMetax);
  EXPECT_EQ(p->nodes[0].node, "node-b");
  Requirements big;
  big.run.min_memory_mib = 70000;
  auto q = policy_.Place({1, 1, big}, Views());
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->vendor, Vendor::kNvidia);
}

TEST_F(PlacementContractTest, BusyDevicesMeanUnavailableNotInfeasible) {
  auto p = policy_.Place({2, 2, {{Vendor::kNvidia}, {}, {}}}, Views({"node-a/nvidia0"}));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(PlacementContractTest, ImpossibleShapesAreFailedPrecondition) {
  EXPECT_EQ(policy_.Place({1, 3, {}}, Views()).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(policy_.Place({2, 2, {{Vendor::kMetax}, {}, {}}}, Views()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(policy_.Place({1, 1, {{}, {"H100"}, {}}}, Views()).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(policy_.Place({3, 0, {}}, Views()).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(PlacementContractTest, CpuJobsTakeNodesWithoutDevices) {
  auto p = policy_.Place({2, 0, {{Vendor::kCpu}, {}, {}}}, Views());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->vendor, Vendor::kCpu);
  EXPECT_TRUE(p->nodes[0].device_ids.empty());
}

TEST_F(PlacementContractTest, UnhealthyDevicesAreSkipped) {
  a_[0].healthy = false;
  auto p = policy_.Place({1, 2, {{Vendor::kNvidia}, {}, {}}}, Views());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->nodes[0].node, "node-b");
}

// Issue 47, item 2: a card a process of no job holds takes no job until it is clean.
TEST_F(PlacementContractTest, DirtyDevicesAreSkipped) {
  a_[0].dirty = "pid 4242 (uid 0, python3) holds 2658 MiB";
  auto two = policy_.Place({1, 2, {{Vendor::kNvidia}, {}, {}}}, Views());
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->nodes[0].node, "node-b");
  b_[0].dirty = b_[1].dirty = a_[0].dirty;
  auto one = policy_.Place({1, 1, {{Vendor::kNvidia}, {}, {}}}, Views());
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->nodes[0].node, "node-a");
  EXPECT_EQ(one->nodes[0].device_ids, std::vector<std::string>{a_[1].id});
  a_[1].dirty = a_[0].dirty;
  EXPECT_FALSE(policy_.Place({1, 1, {{Vendor::kNvidia}, {}, {}}}, Views()).ok());
}

}  // namespace
}  // namespace hetpool::scheduler
