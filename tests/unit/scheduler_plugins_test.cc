// The built-in plugins one at a time, one table each (the device and node filters' tables are in
// scheduler_framework_test.cc, beside the framework that runs them).
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "scheduler/fragmentation.h"
#include "scheduler/plugins/builtin.h"
#include "scheduler/plugins/factories.h"

namespace hetpool::scheduler {
namespace {

PlacementRequest Shape(int nnodes, int devices, int32_t milli = 1000) {
  PlacementRequest r;
  r.nnodes = nnodes;
  r.devices_per_node = devices;
  r.device_milli = milli;
  return r;
}

// The built-in plugin `name` as the extension point `Point` (null when it is not one).
template <typename Point>
std::shared_ptr<Point> Builtin(const std::string& name) {
  auto plugin = MakeBuiltinPlugin(name, nullptr);
  EXPECT_TRUE(plugin.ok()) << plugin.status();
  return plugin.ok() ? std::dynamic_pointer_cast<Point>(*plugin) : nullptr;
}

TEST(PrioritySortPlugin, HigherPriorityFirstThenSubmissionOrder) {
  struct Case {
    QueuedJob a, b;
    bool a_first;
  };
  const Case cases[] = {
      {{5, 9}, {0, 1}, true},                             // priority beats submission order
      {{0, 1}, {5, 9}, false}, {{-3, 1}, {0, 2}, false},  // negative priorities go last
      {{2, 1}, {2, 2}, true},                             // same priority: first submitted first
      {{2, 2}, {2, 2}, false},                            // strict: a job is not before itself
  };
  auto plugin = Builtin<QueueSortPlugin>("PrioritySort");
  ASSERT_NE(plugin, nullptr);
  for (const Case& c : cases) {
    EXPECT_EQ(plugin->Less(c.a, c.b), c.a_first)
        << c.a.priority << "/" << c.a.submit_seq << " vs " << c.b.priority << "/" << c.b.submit_seq;
  }
}

TEST(RequestShapePlugin, RefusesShapesNoNodeHas) {
  struct Case {
    int nnodes, devices;
    std::string error;  // empty: accepted
  };
  const Case cases[] = {
      {1, 0, ""}, {1, 8, ""}, {16, 64, ""}, {0, 1, "a job needs at least one node"}, {1, 65, "no node has 65 devices"},
  };
  auto plugin = Builtin<PreFilterPlugin>("RequestShape");
  ASSERT_NE(plugin, nullptr);
  for (const Case& c : cases) {
    const PlacementRequest request = Shape(c.nnodes, c.devices);
    CycleState state(request);
    const absl::Status s = plugin->PreFilter(state);
    if (c.error.empty()) {
      EXPECT_TRUE(s.ok()) << c.nnodes << "x" << c.devices << ": " << s;
    } else {
      EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
      EXPECT_EQ(s.message(), c.error);
    }
  }
}

TEST(HostResourcesPlugin, HostCpuAndMemoryMustBeFree) {
  NodeView node;
  node.name = "n";
  node.cpu_milli_total = 32000;
  node.cpu_milli_free = 8000;
  node.host_memory_total_mib = 256 * 1024;
  node.host_memory_free_mib = 64 * 1024;
  NodeView unreported;  // a node that reports no CPU or memory is not limited
  unreported.name = "u";
  struct Case {
    const NodeView* node;
    int64_t cpu_milli;
    uint64_t memory_mib;
    std::optional<Rejection> expected;
    std::string reason;
  };
  const Case cases[] = {
      {&node, 0, 0, std::nullopt, ""},
      {&node, 8000, 64 * 1024, std::nullopt, ""},  // exactly what is free
      {&node, 8001, 0, Rejection::kWaiting, "host CPU in use: 8000 of 32000 milli-CPU free"},
      {&node, 32001, 0, Rejection::kNever, "needs 32001 milli-CPU; the node has 32000"},
      {&node, 0, 64 * 1024 + 1, Rejection::kWaiting, "host memory in use: 65536 of 262144 MiB free"},
      {&node, 0, 512 * 1024, Rejection::kNever, "needs 524288 MiB of host memory; the node has 262144"},
      {&unreported, 999999, 999999, std::nullopt, ""},
  };
  auto plugin = Builtin<NodeFilterPlugin>("HostResources");
  ASSERT_NE(plugin, nullptr);
  for (const Case& c : cases) {
    PlacementRequest request = Shape(1, 0);
    request.cpu_milli = c.cpu_milli;
    request.host_memory_mib = c.memory_mib;
    CycleState state(request);
    const auto verdict = plugin->FilterNode(state, *c.node);
    ASSERT_EQ(verdict.has_value(), c.expected.has_value()) << c.cpu_milli << " " << c.memory_mib;
    if (!verdict) continue;
    EXPECT_EQ(verdict->rejection, *c.expected);
    EXPECT_EQ(verdict->reason, c.reason);
  }
}

TEST(GangPlugin, PermitsWholeGangsOnly) {
  const NodeAssignment two{"a", {"g0", "g1"}};
  const NodeAssignment one{"b", {"g0"}};
  struct Case {
    PlacementRequest request;
    std::vector<NodeAssignment> nodes;
    std::string error;  // empty: permitted
  };
  const Case cases[] = {
      {Shape(2, 2), {two, two}, ""},
      {Shape(2, 2), {two}, "only 1 of 2 nodes found"},
      {Shape(2, 2), {two, one}, "b got 1 of 2 devices"},
      {Shape(1, 1, 500), {one}, ""},  // a share is one device, whatever devices_per_node says
      {Shape(1, 1, 500), {two}, "a got 2 of 1 devices"},
      {Shape(1, 0), {{"c", {}}}, ""},  // CPU-only
  };
  auto plugin = Builtin<PermitPlugin>("Gang");
  ASSERT_NE(plugin, nullptr);
  for (const Case& c : cases) {
    CycleState state(c.request);
    Placement placement;
    placement.nodes = c.nodes;
    const absl::Status s = plugin->Permit(state, placement);
    if (c.error.empty()) {
      EXPECT_TRUE(s.ok()) << s;
    } else {
      EXPECT_TRUE(absl::IsUnavailable(s)) << s;
      EXPECT_EQ(s.message(), c.error);
    }
  }
}

TEST(LeftoverScores, BestFitPrefersLeastLeftSpreadMost) {
  DeviceRecord card;
  card.memory_mib = 81920;
  const DeviceView free_card{&card, true, 1000, 81920}, half_used{&card, false, 500, 40960},
      mostly_used{&card, false, 200, 16384};
  struct Case {
    PlacementRequest request;
    std::vector<const DeviceView*> fitting;
    int64_t left;
  };
  const Case cases[] = {
      {Shape(1, 2), {&free_card, &free_card, &free_card}, 1},  // whole cards: free cards left
      {Shape(1, 2), {&free_card, &free_card}, 0},
      {Shape(1, 1, 200), {&free_card, &half_used}, 300},  // a share: on the fullest card that fits
      {Shape(1, 1, 200), {&free_card, &half_used, &mostly_used}, 0},
  };
  auto best_fit = Builtin<ScorePlugin>("BestFit");
  auto spread = Builtin<ScorePlugin>("Spread");
  ASSERT_TRUE(best_fit != nullptr && spread != nullptr);
  for (const Case& c : cases) {
    NodeCandidate candidate;
    candidate.fitting = c.fitting;
    CycleState state(c.request);
    EXPECT_EQ(plugins::LeftAfter(c.request, candidate), c.left);
    EXPECT_EQ(best_fit->Score(state, candidate), -c.left);
    EXPECT_EQ(spread->Score(state, candidate), c.left);
    EXPECT_FALSE(best_fit->NeedsDeviceSelection());
  }
}

TEST(LinkScorePlugin, ScoresTheChosenSetsLinks) {
  auto plugin = Builtin<ScorePlugin>("LinkScore");
  ASSERT_NE(plugin, nullptr);
  EXPECT_TRUE(plugin->NeedsDeviceSelection());  // link_score is set by the device selection
  const PlacementRequest request = Shape(1, 2);
  CycleState state(request);
  for (int links : {0, 12, 400}) {
    NodeCandidate candidate;
    candidate.link_score = links;
    EXPECT_EQ(plugin->Score(state, candidate), links);
  }
}

// A node of cards given by their free milli (1000: idle), with host CPU free of total.
struct TestNode {
  std::vector<DeviceRecord> cards;
  NodeView view;
  TestNode(std::vector<int32_t> free_milli, int64_t cpu_free = 0, int64_t cpu_total = 0) {
    cards.resize(free_milli.size());
    for (size_t i = 0; i < free_milli.size(); ++i) {
      cards[i].index = static_cast<int>(i);
      cards[i].vendor = Vendor::kNvidia;
      cards[i].id = absl::StrCat("nvidia", i);
      cards[i].model = "T4";
      cards[i].memory_mib = 16000;
      view.devices.push_back(
          {&cards[i], free_milli[i] == 1000, free_milli[i], 16u * static_cast<uint64_t>(free_milli[i])});
    }
    view.name = "n";
    view.schedulable = true;
    view.cpu_milli_free = cpu_free;
    view.cpu_milli_total = cpu_total;
  }
  TestNode(const TestNode&) = delete;  // the view points into cards
  // The candidate for a device job (chosen: these cards) or, with no devices, a CPU job.
  NodeCandidate Candidate(std::vector<size_t> chosen = {}, Vendor vendor = Vendor::kNvidia) const {
    NodeCandidate c;
    c.node = &view;
    c.vendor = vendor;
    for (size_t i : chosen) c.chosen.push_back(&view.devices[i]);
    return c;
  }
};

TEST(TieRankPlugin, CpuJobsWhereLeastGpuIsFreeDeviceJobsOnNodesInUse) {
  struct Case {
    const char* what;
    std::vector<int32_t> free;
    PlacementRequest request;
    int64_t score;
  };
  PlacementRequest cpu_job = Shape(1, 0);
  const Case cases[] = {
      {"device job, idle node", {1000, 1000}, Shape(1, 1), 0},
      {"device job, node with a share taken", {1000, 750}, Shape(1, 1), 1},
      {"device job, node with a card taken", {0, 1000}, Shape(1, 1), 1},
      {"CPU job: minus the GPU milli free", {1000, 750}, cpu_job, -1750},
      {"CPU job, full node", {0, 0}, cpu_job, 0},
  };
  auto plugin = Builtin<ScorePlugin>("TieRank");
  ASSERT_NE(plugin, nullptr);
  EXPECT_FALSE(plugin->NeedsDeviceSelection());
  for (const Case& c : cases) {
    TestNode node(c.free);
    CycleState state(c.request);
    EXPECT_EQ(
        plugin->Score(state, node.Candidate({}, c.request.devices_per_node == 0 ? Vendor::kCpu : Vendor::kNvidia)),
        c.score)
        << c.what;
  }
  // A tie-break: never more than 99, less than one level of a score weighed 100 times as much.
  std::vector<int64_t> scores = {-3000, -500, -1750};
  plugin->NormalizeScore(scores);
  EXPECT_EQ(scores, (std::vector<int64_t>{0, 99, 49}));
  std::vector<int64_t> same = {1, 1};
  plugin->NormalizeScore(same);
  EXPECT_EQ(same, (std::vector<int64_t>{0, 0}));
}

TEST(PackingPlugin, PartlyUsedCardThenNodeInUseThenIdleNode) {
  constexpr int64_t kTier = int64_t{1} << 32;
  struct Case {
    const char* what;
    std::vector<int32_t> free;
    PlacementRequest request;
    std::vector<size_t> chosen;
    int64_t score;
  };
  const Case cases[] = {
      {"share on a partly used card", {1000, 600}, Shape(1, 1, 250), {1}, 400},
      {"share on an idle card of a node in use", {1000, 600}, Shape(1, 1, 250), {0}, -kTier + 400},
      {"share on an idle node", {1000, 1000}, Shape(1, 1, 250), {0}, -2 * kTier},
      {"whole card on a node in use", {0, 1000}, Shape(1, 1), {1}, -kTier + 1000},
      {"whole card on an idle node", {1000, 1000}, Shape(1, 1), {0}, -2 * kTier},
  };
  auto plugin = Builtin<ScorePlugin>("Packing");
  ASSERT_NE(plugin, nullptr);
  EXPECT_TRUE(plugin->NeedsDeviceSelection());  // the tier of a share depends on its card
  for (const Case& c : cases) {
    TestNode node(c.free);
    CycleState state(c.request);
    EXPECT_EQ(plugin->Score(state, node.Candidate(c.chosen)), c.score) << c.what;
  }
}

TEST(BestFitPlugin, SharesOfGpuAndCpuLeftAsThePaperScoresThem) {
  auto made = MakeBuiltinPlugin("BestFit", {{"of", "shares"}});
  ASSERT_TRUE(made.ok()) << made.status();
  auto* plugin = dynamic_cast<ScorePlugin*>(made->get());
  struct Case {
    const char* what;
    std::vector<int32_t> free;
    int64_t cpu_free, cpu_total;
    PlacementRequest request;
    int64_t score;  // minus the millionths left
  };
  PlacementRequest share = Shape(1, 1, 250);
  share.cpu_milli = 4000;
  PlacementRequest cpu_job = Shape(1, 0);
  cpu_job.cpu_milli = 8000;
  const Case cases[] = {
      {"share: (1500-250)/2000 GPU + 4000/32000 CPU", {1000, 500}, 8000, 32000, share, -(625000 + 125000)},
      {"no CPU total: GPU only", {1000, 500}, 0, 0, share, -625000},
      {"CPU job: all GPU left + CPU left", {1000, 1000}, 16000, 32000, cpu_job, -(1000000 + 250000)},
  };
  for (const Case& c : cases) {
    TestNode node(c.free, c.cpu_free, c.cpu_total);
    CycleState state(c.request);
    EXPECT_EQ(
        plugin->Score(state, node.Candidate({}, c.request.devices_per_node == 0 ? Vendor::kCpu : Vendor::kNvidia)),
        c.score)
        << c.what;
  }
  std::vector<int64_t> raw = {-750000, -625000};
  plugin->NormalizeScore(raw);  // raw, as the paper compares them
  EXPECT_EQ(raw, (std::vector<int64_t>{-750000, -625000}));
}

TEST(RandomPlugin, TheSeedMakesTheDrawsRepeatable) {
  auto draws = [](uint64_t seed) {
    auto made = MakeBuiltinPlugin("Random", {{"seed", seed}});
    EXPECT_TRUE(made.ok());
    auto* plugin = dynamic_cast<ScorePlugin*>(made->get());
    const PlacementRequest request = Shape(1, 1);
    CycleState state(request);
    std::vector<int64_t> out;
    for (int i = 0; i < 4; ++i) out.push_back(plugin->Score(state, NodeCandidate{}));
    for (int64_t d : out) EXPECT_LT(d, int64_t{1} << 56);  // room for a weight of 100
    return out;
  };
  EXPECT_EQ(draws(7), draws(7));
  EXPECT_NE(draws(7), draws(8));
}

// Fgd against a declared mix: with 4-card jobs expected, one card goes where four stay free
// (5 -> 4) rather than where it strands three (4 -> 3); and a CPU job's CPU strands GPUs when
// it leaves the node too little CPU for the expected GPU jobs.
TEST(FgdPlugin, WeighsTheExpectedMixIncludingHostCpu) {
  auto made = MakeBuiltinPlugin("Fgd", {{"mix", "expected"}});
  ASSERT_TRUE(made.ok()) << made.status();
  auto* plugin = dynamic_cast<ScorePlugin*>(made->get());
  auto* aware = dynamic_cast<WorkloadAwarePlugin*>(made->get());
  ASSERT_TRUE(plugin != nullptr && aware != nullptr);
  aware->ExpectWorkload({{8000, 4, 1000, {}, 1.0}});
  const PlacementRequest one = Shape(1, 1);
  CycleState state(one);
  TestNode five({1000, 1000, 1000, 1000, 1000}, 64000, 64000), four({1000, 1000, 1000, 1000, 0}, 64000, 64000);
  EXPECT_EQ(plugin->Score(state, five.Candidate({0})), FgdScore(0));
  EXPECT_EQ(plugin->Score(state, four.Candidate({0})), FgdScore(3000));  // 3 idle cards no 4-card job can use
  PlacementRequest cpu_job = Shape(1, 0);
  cpu_job.cpu_milli = 4000;
  CycleState cpu_state(cpu_job);
  TestNode roomy({1000, 1000, 1000, 1000}, 20000, 64000), tight({1000, 1000, 1000, 1000}, 10000, 64000);
  EXPECT_EQ(plugin->Score(cpu_state, roomy.Candidate({}, Vendor::kCpu)), FgdScore(0));
  EXPECT_EQ(plugin->Score(cpu_state, tight.Candidate({}, Vendor::kCpu)), FgdScore(4000));  // 6000 < 8000 left
}

// The submitted mix: what users send, model names included, however many distinct names they
// send (the plugin starts its name ids over when they are many), still scores right.
TEST(FgdPlugin, WeighsTheSubmittedMixWhateverModelsJobsName) {
  auto made = MakeBuiltinPlugin("Fgd", {{"mix", "submitted"}, {"window", 1}});
  ASSERT_TRUE(made.ok()) << made.status();
  auto* plugin = dynamic_cast<ScorePlugin*>(made->get());
  auto* aware = dynamic_cast<WorkloadAwarePlugin*>(made->get());
  ASSERT_TRUE(plugin != nullptr && aware != nullptr);
  const PlacementRequest one = Shape(1, 1);
  CycleState state(one);
  TestNode five({1000, 1000, 1000, 1000, 1000}, 64000, 64000), four({1000, 1000, 1000, 1000, 0}, 64000, 64000);
  for (int i = 0; i < 1500; ++i) {
    PlacementRequest ghost = Shape(1, 4);
    ghost.requirements.models = {absl::StrCat("ghost-", i)};
    aware->NoteSubmitted(ghost);
    plugin->Score(state, five.Candidate({0}));  // builds the measure for this mix
  }
  aware->NoteSubmitted(Shape(1, 4));  // the window holds this one job: 4 cards, any model
  EXPECT_EQ(plugin->Score(state, five.Candidate({0})), FgdScore(0));
  EXPECT_EQ(plugin->Score(state, four.Candidate({0})), FgdScore(3000));
}

// size_damping weighs the shapes that ask for more cards down: with 1-card and 4-card jobs
// expected half and half, one card that strands three of a node's four scores the 4-card share
// of the mix x 3000: 1/2 undamped, 1/(1 + (7/4)^d) damped by d ((1 + 4/3)^-d against (1 + 1/3)^-d).
TEST(FgdPlugin, SizeDampingWeighsBigShapesDown) {
  const PlacementRequest one = Shape(1, 1);
  CycleState state(one);
  TestNode four({1000, 1000, 1000, 1000, 0}, 64000, 64000);
  for (const double damping : {0.0, 1.0, 2.5}) {
    auto made = MakeBuiltinPlugin("Fgd", {{"mix", "expected"}, {"size_damping", damping}});
    ASSERT_TRUE(made.ok()) << made.status();
    auto* plugin = dynamic_cast<ScorePlugin*>(made->get());
    dynamic_cast<WorkloadAwarePlugin*>(made->get())->ExpectWorkload({{0, 1, 1000, {}, 0.5}, {0, 4, 1000, {}, 0.5}});
    const double increase = 3000 / (1 + std::pow(7.0 / 4.0, damping));
    EXPECT_EQ(plugin->Score(state, four.Candidate({0})), FgdScore(increase)) << "size_damping " << damping;
  }
  // Damped harder, the stranded cards count for less: the score rises (from level 18 to 35 here).
  EXPECT_LT(FgdScore(1500), FgdScore(3000 / (1 + std::pow(7.0 / 4.0, 2.5))));
}

TEST(BuiltinPlugins, ArgumentsAreCheckedByName) {
  struct Case {
    std::string name;
    nlohmann::json args;
    std::string error;  // empty: built
  };
  const std::vector<Case> cases = {
      {"BestFit", nullptr, ""},
      {"BestFit", nlohmann::json::object(), ""},
      {"BestFit", {{"weight", 2}}, "plugin BestFit: unknown arg 'weight' (of)"},
      {"BestFit", {{"of", "shares"}}, ""},
      {"BestFit", {{"of", "cards"}}, "plugin BestFit: of must be \"devices\" or \"shares\""},
      {"Random", {{"seed", 7}}, ""},
      {"Random", {{"seed", -7}}, "plugin Random: seed must be a non-negative integer"},
      {"TieRank", {{"x", 1}}, "plugin TieRank takes no args"},
      {"Gang", {{"x", 1}}, "plugin Gang takes no args"},
      {"Fgd", nullptr, ""},
      {"Fgd", {{"window", 1}}, ""},
      {"Fgd", {{"window", 0}}, "plugin Fgd: window must be an integer in 1..100000"},
      {"Fgd", {{"window", 100001}}, "plugin Fgd: window must be an integer in 1..100000"},
      {"Fgd", {{"window", "5"}}, "plugin Fgd: window must be an integer in 1..100000"},
      {"Fgd", {{"size", 5}}, "plugin Fgd: unknown arg 'size' (window, mix, size_damping)"},
      {"Fgd", {{"size_damping", 1.5}}, ""},
      {"Fgd", {{"size_damping", -1}}, "plugin Fgd: size_damping must be a number in 0..8"},
      {"Fgd", {{"size_damping", "2"}}, "plugin Fgd: size_damping must be a number in 0..8"},
      {"Fgd", {{"mix", "expected"}}, ""},
      {"Fgd", {{"mix", "submitted"}}, ""},
      {"Fgd", {{"mix", "recent"}}, "plugin Fgd: mix must be \"placed\", \"submitted\" or \"expected\""},
      {"Fgd", nlohmann::json::array(), "plugin Fgd: args must be an object"},
      {"Cheapest", nullptr, "unknown plugin 'Cheapest'"},
  };
  for (const Case& c : cases) {
    auto plugin = MakeBuiltinPlugin(c.name, c.args);
    if (c.error.empty()) {
      ASSERT_TRUE(plugin.ok()) << c.name << " " << c.args.dump() << ": " << plugin.status();
      EXPECT_EQ((*plugin)->Name(), c.name);
    } else {
      EXPECT_FALSE(plugin.ok()) << c.name << " " << c.args.dump();
      EXPECT_EQ(plugin.status().message(), c.error);
    }
  }
  // Every registered name builds without arguments and answers to its own name.
  for (const std::string& name : BuiltinPluginNames()) {
    auto plugin = MakeBuiltinPlugin(name, nullptr);
    ASSERT_TRUE(plugin.ok()) << name;
    EXPECT_EQ((*plugin)->Name(), name);
  }
}

// Jobs in images (docs/containers.md): only nodes with a runtime; those holding the image first.
TEST(ContainerRuntimePlugin, AnImageJobWaitsForANodeWithARuntime) {
  auto plugin = Builtin<NodeFilterPlugin>("ContainerRuntime");
  ASSERT_NE(plugin, nullptr);
  NodeView with, without;
  with.container_runtime = "podman";
  PlacementRequest plain = Shape(1, 1);
  PlacementRequest imaged = Shape(1, 1);
  imaged.in_image = true;
  imaged.images[Vendor::kNvidia] = "site/torch:2.4";
  CycleState plain_state(plain), imaged_state(imaged);
  EXPECT_FALSE(plugin->FilterNode(plain_state, without).has_value());
  EXPECT_FALSE(plugin->FilterNode(imaged_state, with).has_value());
  const auto verdict = plugin->FilterNode(imaged_state, without);
  ASSERT_TRUE(verdict.has_value());
  EXPECT_EQ(verdict->rejection, Rejection::kWaiting);  // a runtime may be installed
  EXPECT_EQ(verdict->reason, "no container runtime on the node (the job runs in an image)");
}

TEST(ImageLocalityPlugin, PrefersTheNodeThatHoldsTheImageOfItsVendor) {
  auto plugin = Builtin<ScorePlugin>("ImageLocality");
  ASSERT_NE(plugin, nullptr);
  const std::set<std::string> cuda_image = {"site/torch-cuda:2.4"}, maca_image = {"site/torch-maca:2.4"};
  NodeView holds_cuda, holds_maca, holds_none;
  holds_cuda.images = &cuda_image;
  holds_maca.images = &maca_image;
  PlacementRequest request = Shape(1, 1);
  request.in_image = true;
  request.images = {{Vendor::kNvidia, "site/torch-cuda:2.4"}, {Vendor::kMetax, "site/torch-maca:2.4"}};
  CycleState state(request);
  auto score = [&](const NodeView& node, Vendor vendor) {
    NodeCandidate c;
    c.node = &node;
    c.vendor = vendor;
    return plugin->Score(state, c);
  };
  EXPECT_EQ(score(holds_cuda, Vendor::kNvidia), 1);
  EXPECT_EQ(score(holds_cuda, Vendor::kMetax), 0);  // the MetaX image is what a MetaX node needs
  EXPECT_EQ(score(holds_maca, Vendor::kMetax), 1);
  EXPECT_EQ(score(holds_none, Vendor::kNvidia), 0);
  PlacementRequest plain = Shape(1, 1);
  CycleState plain_state(plain);
  NodeCandidate c;
  c.node = &holds_cuda;
  c.vendor = Vendor::kNvidia;
  EXPECT_EQ(plugin->Score(plain_state, c), 0);  // no image: every node alike
}

}  // namespace
}  // namespace hetpool::scheduler
