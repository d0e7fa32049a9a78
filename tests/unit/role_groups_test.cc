// A job across vendors through the real framework (the shipped profile): role groups placed as
// one gang, the most constrained first; mixed_vendors on one vendor when it can, else the fastest
// first; a named collective only on nodes that have it; and the batch split by card speed.
#include <gtest/gtest.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "drivers/fingerprint/fingerprint.h"
#include "scheduler/framework/framework.h"
#include "scheduler/framework/pending_reason.h"
#include "scheduler/framework/profile.h"
#include "src/daemon/launch/batch_split.h"
#include "src/daemon/launch/collective.h"

namespace hetpool::scheduler {
namespace {

struct Node {
  std::string name;
  std::vector<std::pair<Vendor, std::string>> cards;  // vendor, model
  int busy = 0;                                       // the first `busy` cards are taken
  std::set<std::string> collectives;
};

// Views over cards that live as long as the pool.
class MixedPool {
 public:
  explicit MixedPool(const std::vector<Node>& nodes) {
    for (const Node& n : nodes) {
      auto& cards = devices_.emplace_back(std::make_unique<std::vector<DeviceRecord>>());
      std::map<Vendor, int> index;
      for (const auto& [vendor, model] : n.cards) {
        DeviceRecord d;
        d.vendor = vendor;
        d.index = index[vendor]++;
        d.id = absl::StrCat(VendorName(vendor), d.index);
        d.model = model;
        d.memory_mib = 65536;
        drivers::ApplyFingerprint(drivers::SpecTable::Defaults(), d);
        cards->push_back(d);
      }
      NodeView v{n.name, true, {}, {{"cuda", "mlu", "cpu"}, false, n.collectives}};
      for (size_t i = 0; i < cards->size(); ++i) {
        const bool taken = static_cast<int>(i) < n.busy;
        v.devices.push_back({&(*cards)[i], !taken, taken ? 0 : 1000, taken ? 0 : (*cards)[i].memory_mib});
      }
      v.generation = ContentGeneration(v);
      views.push_back(std::move(v));
    }
  }
  std::vector<NodeView> views;

 private:
  std::vector<std::unique_ptr<std::vector<DeviceRecord>>> devices_;
};

const std::pair<Vendor, std::string> kH100{Vendor::kNvidia, "H100-SXM"};
const std::pair<Vendor, std::string> kMlu{Vendor::kCambricon, "MLU370-X8"};
const std::pair<Vendor, std::string> kC500{Vendor::kMetax, "MXC500"};

// The quickstart pool: node-a 2 x H100 + 2 x MLU370, node-b 2 x H100 + 2 x C500.
std::vector<Node> Quickstart(int busy_a = 0) {
  return {{"node-a", {kH100, kH100, kMlu, kMlu}, busy_a}, {"node-b", {kH100, kH100, kC500, kC500}}};
}

RoleGroup Group(const std::string& name, Vendor vendor, int nnodes, int cards) {
  RoleGroup g;
  g.name = name;
  g.nnodes = nnodes;
  g.devices_per_node = cards;
  g.requirements.vendors = {vendor};
  return g;
}

// nnodes x cards of any vendors (mixed_vendors).
PlacementRequest AnyVendors(int nnodes, int cards) {
  PlacementRequest job;
  job.mixed_vendors = true;
  job.nnodes = nnodes;
  job.devices_per_node = cards;
  return job;
}

std::unique_ptr<Framework> Shipped() {
  auto f = FrameworkFromProfile(DefaultProfileJson());
  EXPECT_TRUE(f.ok()) << f.status();
  return std::move(*f);
}

TEST(RoleGroups, EachGroupOnItsOwnNodeTheMostConstrainedFirst) {
  MixedPool pool(Quickstart());
  PlacementRequest job;
  // Declared NVIDIA first: placed first it could take node-b, the only node with MetaX cards.
  job.groups = {Group("h100", Vendor::kNvidia, 1, 2), Group("c500", Vendor::kMetax, 1, 2)};
  job.nnodes = 2;
  job.devices_per_node = 2;
  auto placement = Shipped()->Place(job, pool.views);
  ASSERT_TRUE(placement.ok()) << placement.status();
  ASSERT_EQ(placement->nodes.size(), 2u);
  // Node ranks follow the declared groups.
  EXPECT_EQ(placement->nodes[0].group, "h100");
  EXPECT_EQ(placement->nodes[0].node, "node-a");
  EXPECT_EQ(placement->nodes[0].vendor, Vendor::kNvidia);
  EXPECT_EQ(placement->nodes[0].device_ids, (std::vector<std::string>{"nvidia0", "nvidia1"}));
  EXPECT_EQ(placement->nodes[1].group, "c500");
  EXPECT_EQ(placement->nodes[1].node, "node-b");
  EXPECT_EQ(placement->nodes[1].vendor, Vendor::kMetax);
  EXPECT_TRUE(placement->Mixed());
}

TEST(RoleGroups, AllGroupsOrNone) {
  // The MLU370 cards are busy: the NVIDIA group could start, but the job waits whole.
  MixedPool pool({{"node-a", {kMlu, kMlu, kH100, kH100}, /*busy=*/2}, {"node-b", {kH100, kH100, kC500, kC500}}});
  PlacementRequest job;
  job.groups = {Group("h100", Vendor::kNvidia, 1, 2), Group("mlu", Vendor::kCambricon, 1, 2)};
  auto placement = Shipped()->Place(job, pool.views);
  ASSERT_TRUE(absl::IsUnavailable(placement.status())) << placement.status();
  EXPECT_NE(placement.status().message().find("group mlu: "), std::string::npos) << placement.status();
  ASSERT_TRUE(PendingReasonOf(placement.status()).has_value());  // the job shows why it waits
  EXPECT_FALSE(PendingReasonOf(placement.status())->never);

  // Two MLU nodes do not exist at all: never, and said so at submission.
  MixedPool free_pool(Quickstart());
  job.groups[1].nnodes = 2;
  placement = Shipped()->Place(job, free_pool.views);
  ASSERT_TRUE(absl::IsFailedPrecondition(placement.status())) << placement.status();
}

TEST(RoleGroups, TwoGroupsNeverShareANode) {
  // One node has both vendors; the job needs them on two nodes and there is only one.
  MixedPool pool({{"node-a", {kH100, kH100, kMlu, kMlu}}});
  PlacementRequest job;
  job.groups = {Group("h100", Vendor::kNvidia, 1, 2), Group("mlu", Vendor::kCambricon, 1, 2)};
  auto placement = Shipped()->Place(job, pool.views);
  EXPECT_FALSE(placement.ok());
}

TEST(MixedVendors, OneVendorWhenOneCanHoldTheJob) {
  MixedPool pool(Quickstart());
  PlacementRequest job = AnyVendors(2, 2);
  auto placement = Shipped()->Place(job, pool.views);
  ASSERT_TRUE(placement.ok()) << placement.status();
  EXPECT_FALSE(placement->Mixed());
  EXPECT_EQ(placement->vendor, Vendor::kNvidia);
}

TEST(MixedVendors, SpillsOntoTheFastestOtherVendor) {
  // NVIDIA only on node-a; the other two nodes hold MLU370 (96 bf16 TFLOPS) and C500 (280, MetaX's
  // figure): the job takes NVIDIA, then MetaX.
  MixedPool pool({{"node-mlu", {kMlu, kMlu}}, {"node-a", {kH100, kH100}}, {"node-c5", {kC500, kC500}}});
  PlacementRequest job = AnyVendors(2, 2);
  auto placement = Shipped()->Place(job, pool.views);
  ASSERT_TRUE(placement.ok()) << placement.status();
  ASSERT_EQ(placement->nodes.size(), 2u);
  EXPECT_EQ(placement->nodes[0].node, "node-a");
  EXPECT_EQ(placement->nodes[0].group, "nvidia");
  EXPECT_EQ(placement->nodes[1].node, "node-c5");
  EXPECT_EQ(placement->nodes[1].group, "metax");

  // Three nodes wanted: all three vendors, the slowest last. Four: never.
  job.nnodes = 3;
  placement = Shipped()->Place(job, pool.views);
  ASSERT_TRUE(placement.ok()) << placement.status();
  EXPECT_EQ(placement->nodes.back().vendor, Vendor::kCambricon);
  job.nnodes = 4;
  EXPECT_TRUE(absl::IsFailedPrecondition(Shipped()->Place(job, pool.views).status()));

  // A node with cards of two vendors hosts one group of a job: it counts once.
  MixedPool one_node({{"node-a", {kH100, kH100, kMlu, kMlu}}});
  job.nnodes = 2;
  auto never = Shipped()->Place(job, one_node.views);
  EXPECT_TRUE(absl::IsFailedPrecondition(never.status())) << never.status();
}

TEST(MixedVendors, ANamedCollectiveOnlyOnNodesThatHaveIt) {
  MixedPool pool({{"node-a", {kH100, kH100}, 0, {"flagcx"}},
                  {"node-b", {kH100, kH100}},
                  {"node-mlu", {kMlu, kMlu}, 0, {"flagcx"}}});
  PlacementRequest job = AnyVendors(2, 2);
  job.collective = "flagcx";
  auto placement = Shipped()->Place(job, pool.views);
  ASSERT_TRUE(placement.ok()) << placement.status();
  EXPECT_EQ(placement->nodes[0].node, "node-a");
  EXPECT_EQ(placement->nodes[1].node, "node-mlu");  // not node-b's NVIDIA cards: no FlagCX there

  MixedPool without({{"node-b", {kH100, kH100}}});
  job.nnodes = 1;
  auto never = Shipped()->Place(job, without.views);
  ASSERT_TRUE(absl::IsFailedPrecondition(never.status())) << never.status();
  EXPECT_NE(never.status().message().find("no node of the pool reports it"), std::string::npos);
}

}  // namespace
}  // namespace hetpool::scheduler

namespace hetpool::daemon {
namespace {

TEST(BatchSplit, ByCardSpeedSummingToTheGlobalBatch) {
  // H100 989 bf16 TFLOPS x 2 ranks, MLU370 96 x 2: 44 samples go 20, 20, 2, 2.
  auto split = SplitGlobalBatch(44, {{"nvidia H100", 2, 989.0}, {"cambricon MLU370", 2, 96.0}}, "bf16");
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_TRUE(split->by_speed);
  EXPECT_EQ(split->micro_batches, (std::vector<std::vector<int>>{{20, 20}, {2, 2}}));
  EXPECT_EQ(split->summary,
            "nvidia H100: 2 rank(s) x 20 (989 TFLOPS bf16 modelled); cambricon MLU370: 2 rank(s) x 2 (96 TFLOPS bf16 "
            "modelled)");

  // Remainders by largest fraction, never below one sample, always the exact total.
  for (int global : {4, 5, 7, 13, 100, 1001}) {
    auto s = SplitGlobalBatch(global, {{"a", 3, 100.0}, {"b", 1, 1.0}}, "bf16");
    ASSERT_TRUE(s.ok());
    int total = 0;
    for (const auto& node : s->micro_batches) {
      for (int b : node) {
        EXPECT_GE(b, 1);
        total += b;
      }
    }
    EXPECT_EQ(total, global);
  }
  EXPECT_FALSE(SplitGlobalBatch(3, {{"a", 2, 1.0}, {"b", 2, 1.0}}, "bf16").ok());
}

TEST(BatchSplit, EvenWhenASpeedIsUnknownOrThereIsOneClass) {
  auto split = SplitGlobalBatch(8, {{"nvidia H100", 2, 989.0}, {"metax MXC500", 2, std::nullopt}}, "bf16");
  ASSERT_TRUE(split.ok());
  EXPECT_FALSE(split->by_speed);
  EXPECT_EQ(split->micro_batches, (std::vector<std::vector<int>>{{2, 2}, {2, 2}}));
  EXPECT_NE(split->summary.find("split evenly: no bf16 peak for metax MXC500"), std::string::npos) << split->summary;
  auto one = SplitGlobalBatch(6, {{"nvidia H100", 2, 989.0}, {"nvidia H100", 1, 989.0}}, "bf16");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->micro_batches, (std::vector<std::vector<int>>{{2, 2}, {2}}));
  EXPECT_EQ(one->summary.find("split evenly"), std::string::npos);
}

TEST(Collective, AutoPrefersFlagcxWhereEveryNodeHasIt) {
  EXPECT_EQ(ChooseCollective("", true), "flagcx");
  EXPECT_EQ(ChooseCollective("auto", false), "hierarchical");
  EXPECT_EQ(ChooseCollective("gloo", true), "gloo");
  const VendorRuntime& mlu = RuntimeOf(Vendor::kCambricon);
  const CollectiveBackends hierarchical = BackendsFor("hierarchical", mlu);
  EXPECT_EQ(hierarchical.world, "gloo");
  EXPECT_EQ(hierarchical.intra, "cncl");
  EXPECT_EQ(hierarchical.inter, "gloo");
  EXPECT_EQ(BackendsFor("flagcx", mlu).world, "cpu:gloo,mlu:flagcx");
  EXPECT_EQ(BackendsFor("gloo", mlu).intra, "gloo");
}

}  // namespace
}  // namespace hetpool::daemon
