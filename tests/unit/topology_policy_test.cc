// Topology choices on the machine fixtures, discovered through the fake NVML library.
#include "scheduler/framework/profile.h"
#include "scheduler/link_score.h"

#include <bit>
#include <random>
#include <set>

#include "drivers/fingerprint/fingerprint.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_vendor.h"

namespace hetpool::scheduler {
namespace {

std::vector<DeviceRecord> Discover(const std::string& fixture) {
  testing::UseFakeVendorLibraries(fixture);
  auto backend = testing::LoadBackend("nvml");
  EXPECT_TRUE(backend.ok()) << backend.status();
  auto devices = (*backend)->Discover();
  EXPECT_TRUE(devices.ok());
  for (auto& d : *devices) drivers::ApplyFingerprint(drivers::SpecTable::Defaults(), d);
  return *devices;
}

std::vector<const DeviceRecord*> Pointers(const std::vector<DeviceRecord>& devices, std::set<int> busy = {}) {
  std::vector<const DeviceRecord*> out;
  for (const auto& d : devices) {
    if (!busy.contains(d.index)) out.push_back(&d);
  }
  return out;
}

std::vector<std::string> Ids(const std::vector<const DeviceRecord*>& devices) {
  std::vector<std::string> ids;
  for (const auto* d : devices) ids.push_back(d->id);
  return ids;
}

TEST(TopologyPolicy, FourCardsOnAnNvSwitchNodeAreFullyLinked) {
  const auto hgx = Discover("dgx-h100");
  auto chosen = ChooseDevices(Pointers(hgx), 4);
  ASSERT_EQ(chosen.size(), 4u);
  EXPECT_EQ(LinkScore(chosen), 118);  // every pair over 18 NVLink lanes
  EXPECT_EQ(Ids(chosen), (std::vector<std::string>{"nvidia0", "nvidia1", "nvidia2", "nvidia3"}));
}

TEST(TopologyPolicy, TwoCardsOnABridgedNodeGetABridgedPair) {
  const auto a100 = Discover("a100-pcie-pairs");
  EXPECT_EQ(Ids(ChooseDevices(Pointers(a100), 2)), (std::vector<std::string>{"nvidia0", "nvidia1"}));
  // nvidia0 busy: its partner is not paired with a stranger; the next whole bridge is used.
  EXPECT_EQ(Ids(ChooseDevices(Pointers(a100, {0}), 2)), (std::vector<std::string>{"nvidia2", "nvidia3"}));
  // Four cards: both bridges of socket 1 rather than a set straddling the sockets.
  auto four = ChooseDevices(Pointers(a100, {0}), 4);
  EXPECT_EQ(Ids(four), (std::vector<std::string>{"nvidia4", "nvidia5", "nvidia6", "nvidia7"}));
  EXPECT_TRUE(ChooseDevices(Pointers(a100, {0, 1, 2, 3, 4, 5, 6}), 2).empty());
}

// ChooseFromTable scores each subset from its members' rows; the choice must be the one the plain
// definition gives (best average over the chosen pairs, then over the pairs left, first found).
TEST(TopologyPolicy, ChoiceFromTheTableIsTheBestSubsetByDefinition) {
  std::mt19937 rng(11);
  for (int round = 0; round < 300; ++round) {
    const size_t n = 2 + rng() % 9;
    std::vector<int> table(n * n, 0);
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = i + 1; j < n; ++j) table[i * n + j] = table[j * n + i] = static_cast<int>(rng() % 4) * 40;
    }
    std::vector<size_t> free;
    for (size_t i = 0; i < n; ++i) {
      if (rng() % 4 != 0) free.push_back(i);
    }
    const int count = 1 + static_cast<int>(rng() % n);
    // The definition, over every subset of `free` in lexicographic order of positions.
    auto average = [&](const std::vector<size_t>& members) {
      int sum = 0, pairs = 0;
      for (size_t a = 0; a < members.size(); ++a) {
        for (size_t b = a + 1; b < members.size(); ++b, ++pairs) sum += table[members[a] * n + members[b]];
      }
      return pairs == 0 ? 0 : sum / pairs;
    };
    std::vector<size_t> expected;
    int best = -1, best_rest = -1;
    const size_t k = free.size();
    for (uint32_t mask = 0; static_cast<int>(k) >= count && mask < (1u << k); ++mask) {
      if (std::popcount(mask) != count) continue;
      std::vector<size_t> in, out;
      for (size_t i = 0; i < k; ++i) (mask >> i & 1u ? in : out).push_back(free[i]);
      const int score = average(in), rest = average(out);
      // Ties: the subset ForEachSubset meets first (lexicographic by position), as the code keeps.
      if (score > best || (score == best && rest > best_rest) ||
          (score == best && rest == best_rest &&
           std::lexicographical_compare(in.begin(), in.end(), expected.begin(), expected.end()))) {
        expected = in;
        best = score;
        best_rest = rest;
      }
    }
    EXPECT_EQ(ChooseFromTable(table, n, free, count), expected) << "round " << round;
  }
}

TEST(TopologyPolicy, BestFitKeepsWholeNodesFreeAndBigJobsTakeWholeNodes) {
  const auto big = Discover("a100-pcie-pairs");
  const auto small_source = Discover("a100-pcie-pairs");
  auto view = [](const std::string& name, const std::vector<DeviceRecord>& devices, std::set<int> busy) {
    NodeView v{name, true, {}, {{"cuda", "cpu"}, false}};
    for (const auto& d : devices) v.devices.push_back({&d, !busy.contains(d.index)});
    return v;
  };
  // node-a: all 8 free; node-b: only a bridged pair free.
  std::vector<NodeView> nodes = {view("node-a", big, {}), view("node-b", small_source, {0, 1, 2, 3, 4, 5})};
  auto framework = DefaultFramework();
  PlacementPolicy& policy = *framework;
  auto two = policy.Place({1, 2, {}}, nodes);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->nodes[0].node, "node-b");
  EXPECT_EQ(two->nodes[0].device_ids, (std::vector<std::string>{"nvidia6", "nvidia7"}));
  EXPECT_EQ(two->nodes[0].link_score, 112);
  auto eight = policy.Place({1, 8, {}}, nodes);
  ASSERT_TRUE(eight.ok());
  EXPECT_EQ(eight->nodes[0].node, "node-a");
  EXPECT_EQ(eight->nodes[0].device_ids.size(), 8u);
  // Impossible shapes are "never" (FailedPrecondition), busy ones "not now" (Unavailable).
  EXPECT_EQ(policy.Place({1, 9, {}}, nodes).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(policy.Place({2, 4, {}}, nodes).status().code(), absl::StatusCode::kUnavailable);
}

TEST(TopologyPolicy, SixteenCardJobTakesTwoNodesOfOneRack) {
  const auto hgx = Discover("dgx-h100");
  // n1 alone in rack r1; n2 and n3 in rack r2: best fit by name alone would pick n1 + n2.
  std::vector<NodeView> nodes;
  for (const auto& [name, rack] : {std::pair{"n1", "r1"}, std::pair{"n2", "r2"}, std::pair{"n3", "r2"}}) {
    NodeView v{name, true, {}, {{"cuda", "cpu"}, false}, rack};
    for (const auto& d : hgx) v.devices.push_back({&d, true, 1000, d.memory_mib});
    nodes.push_back(std::move(v));
  }
  auto framework = DefaultFramework();
  PlacementPolicy& policy = *framework;
  auto placement = policy.Place({2, 8, {}}, nodes);
  ASSERT_TRUE(placement.ok()) << placement.status();
  EXPECT_EQ(placement->nodes[0].node, "n2");
  EXPECT_EQ(placement->nodes[1].node, "n3");
  // Without a rack that can hold it, the job spans racks rather than waiting.
  nodes[2].rack = "r3";
  placement = policy.Place({2, 8, {}}, nodes);
  ASSERT_TRUE(placement.ok());
  EXPECT_EQ(placement->nodes.size(), 2u);
}

}  // namespace
}  // namespace hetpool::scheduler
