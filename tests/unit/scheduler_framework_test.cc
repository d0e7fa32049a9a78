// The scheduler's plugin framework: profiles, each built-in plugin on its own, scoring and
// normalisation, Reserve/Unreserve around Bind, and the structured pending reasons.
#include <gtest/gtest.h>

#include <array>
#include <fstream>
#include <random>

#include "absl/strings/numbers.h"
#include "nlohmann/json.hpp"

#include "drivers/fingerprint/fingerprint.h"
#include "scheduler/framework/framework.h"
#include "scheduler/framework/profile.h"
#include "scheduler/plugins/builtin.h"

namespace hetpool::scheduler {
namespace {

constexpr char kRequired[] =
    R"("filter": ["Fingerprint", "NodeSchedulable", "HostResources", "DeviceHealth", "Capacity", "Quota", "Reservation"], "permit": ["Gang"])";

std::string Profile(const std::string& score) {
  return absl::StrCat(R"({"preFilter": ["RequestShape"], )", kRequired, R"(, "score": )", score, "}");
}

TEST(SchedulerProfile, DefaultAndCustomProfilesLoad) {
  EXPECT_TRUE(FrameworkFromProfile(DefaultProfileJson()).ok());
  EXPECT_TRUE(FrameworkFromProfile(Profile(R"([{"name": "Spread", "weight": 5}, "LinkScore"])")).ok());
}

TEST(SchedulerProfile, TheShippedProfileIsTheDefault) {
  std::ifstream in(HETPOOL_SOURCE_DIR_FOR_TESTS "/deploy/scheduler-profile.json");
  const nlohmann::json shipped = nlohmann::json::parse(in, nullptr, false);
  EXPECT_EQ(shipped, nlohmann::json::parse(DefaultProfileJson()));
}

TEST(SchedulerProfile, MistakesAreNamed) {
  const std::pair<std::string, std::string> cases[] = {
      {"[1, 2]", "profile: not a JSON object"},
      {R"({"scores": []})", "unknown extension point 'scores'"},
      {Profile(R"(["Cheapest"])"), "unknown plugin 'Cheapest' (known: BestFit, Capacity"},
      {Profile(R"(["Capacity"])"), "Capacity is not a score plugin"},
      {Profile(R"([{"name": "BestFit", "weight": 0}])"), "weight must be an integer in 1..1000"},
      {Profile(R"([{"name": "BestFit", "wieght": 2}])"), "unknown key 'wieght'"},
      {Profile(R"([{"name": "Fgd", "args": {"window": -3}}])"), "window must be an integer in 1..100000"},
      {Profile(R"([{"name": "Fgd", "args": {"size": 3}}])"), "plugin Fgd: unknown arg 'size'"},
      {Profile(R"([{"name": "BestFit", "args": {"x": 1}}])"), "plugin BestFit: unknown arg 'x' (of)"},
      {Profile(R"(["BestFit", "BestFit"])"), "score lists BestFit twice"},
      {R"({"filter": ["Fingerprint", "NodeSchedulable", "DeviceHealth"], "permit": ["Gang"]})",
       "filter must include Capacity"},
      {R"({"filter": ["Fingerprint", "NodeSchedulable", "HostResources", "DeviceHealth", "Capacity", "Quota", "Reservation"]})",
       "permit must include Gang"},
      {R"({"filter": ["Fingerprint", "NodeSchedulable", "DeviceHealth", "Capacity"], "permit": ["Gang"]})",
       "filter must include HostResources"},
      {R"({"filter": ["Fingerprint", "NodeSchedulable", "HostResources", "DeviceHealth", "Capacity", "Reservation"], "permit": ["Gang"]})",
       "filter must include Quota"},
      {R"({"filter": ["Fingerprint", "NodeSchedulable", "HostResources", "DeviceHealth", "Capacity", "Quota"], "permit": ["Gang"]})",
       "filter must include Reservation"},
      {R"({"queueSort": ["PrioritySort", "PrioritySort"], )" + std::string(kRequired) + "}",
       "queueSort takes one plugin"},
      {R"({"queueSort": ["BestFit"], )" + std::string(kRequired) + "}", "BestFit is not a queueSort plugin"},
      {Profile(R"(["BestFit"], "nodesToScore": 0)"), "nodesToScore must be an integer in 1..1000000"},
      {Profile(R"(["BestFit"], "nodesToFind": -1)"), "nodesToFind must be an integer in 0..1000000 (0: adaptive)"},
  };
  for (const auto& [profile, expected] : cases) {
    auto f = FrameworkFromProfile(profile);
    ASSERT_FALSE(f.ok()) << profile;
    EXPECT_NE(f.status().message().find(expected), std::string::npos) << f.status().message();
  }
}

// --- a small pool -----------------------------------------------------------------------------

DeviceRecord Card(int index, Vendor vendor = Vendor::kNvidia, const std::string& model = "NVIDIA H100 80GB HBM3") {
  DeviceRecord d;
  d.index = index;
  d.vendor = vendor;
  d.id = absl::StrCat(VendorName(vendor), index);
  d.model = model;
  d.memory_mib = 81920;
  drivers::ApplyFingerprint(drivers::SpecTable::Defaults(), d);
  return d;
}

// `cards` per node; `busy[i]` cards of node i are taken (the lowest indices).
struct Pool {
  std::vector<std::vector<DeviceRecord>> devices;
  std::vector<NodeView> views;
  Pool(int nodes, int cards, std::vector<int> busy = {}) {
    devices.resize(static_cast<size_t>(nodes));
    for (int n = 0; n < nodes; ++n) {
      for (int c = 0; c < cards; ++c) devices[static_cast<size_t>(n)].push_back(Card(c));
    }
    for (int n = 0; n < nodes; ++n) {
      NodeView v{absl::StrCat("n", n), true, {}, {{"cuda", "cpu"}, false}};
      for (const auto& d : devices[static_cast<size_t>(n)]) {
        const bool taken = static_cast<size_t>(n) < busy.size() && d.index < busy[static_cast<size_t>(n)];
        v.devices.push_back({&d, !taken, taken ? 0 : 1000, taken ? 0 : d.memory_mib});
      }
      views.push_back(std::move(v));
    }
  }
};

PlacementRequest Whole(int nnodes, int devices) {
  PlacementRequest r;
  r.nnodes = nnodes;
  r.devices_per_node = devices;
  return r;
}

// --- filters, one plugin at a time (table-driven) ---------------------------------------------

TEST(SchedulerPlugins, DeviceFilters) {
  DeviceRecord h100 = Card(0);
  DeviceRecord sick = Card(1);
  sick.healthy = false;
  sick.health_message = "XID 79";
  DeviceRecord mlu = Card(2, Vendor::kCambricon, "MLU370-X8");
  PlacementRequest fp8 = Whole(1, 1);
  fp8.requirements.run.precisions = {Precision::kFp8};
  PlacementRequest half = Whole(1, 1);
  half.device_milli = 500;
  PlacementRequest too_big = half;
  too_big.device_memory_mib = 100000;
  PlacementRequest over_quota = Whole(1, 1);
  over_quota.quota_blocked = [](const DeviceRecord& d) -> std::optional<std::string> {
    if (d.vendor != Vendor::kNvidia) return std::nullopt;
    return "quota: user carol holds 1 of 1 cards (*); the job needs 1";
  };
  DeviceView held{&h100, true, 1000, 81920};
  held.held = true;
  const NodeView node{"n", true, {}, {{"cuda", "cpu", "mlu"}, false}};
  struct Case {
    std::string plugin;
    PlacementRequest request;
    DeviceView device;
    std::optional<Rejection> expected;
    std::string reason;
  };
  const Case cases[] = {
      {"Fingerprint", fp8, {&h100, true, 1000, 81920}, std::nullopt, ""},
      {"Fingerprint", fp8, {&mlu, true, 1000, 81920}, Rejection::kNever, "fp8"},
      {"DeviceHealth", Whole(1, 1), {&sick, true, 1000, 81920}, Rejection::kWaiting, "XID 79"},
      {"DeviceHealth", Whole(1, 1), {&h100, true, 1000, 81920}, std::nullopt, ""},
      {"Capacity", Whole(1, 1), {&h100, false, 500, 40960}, Rejection::kWaiting, "in use"},
      {"Capacity", half, {&h100, false, 500, 40960}, std::nullopt, ""},
      {"Capacity", half, {&h100, false, 400, 40960}, Rejection::kWaiting, "in use"},
      {"Capacity", too_big, {&h100, true, 1000, 81920}, Rejection::kNever, "share needs 100000 MiB of a 81920 MiB"},
      {"Quota", Whole(1, 1), {&h100, true, 1000, 81920}, std::nullopt, ""},  // no quota
      {"Quota", over_quota, {&h100, true, 1000, 81920}, Rejection::kWaiting, "quota: user carol holds 1 of 1"},
      {"Quota", over_quota, {&mlu, true, 1000, 81920}, std::nullopt, ""},  // another class
      {"Reservation", Whole(1, 1), held, Rejection::kWaiting, "held for the job first in line"},
      {"Reservation", Whole(1, 1), {&h100, true, 1000, 81920}, std::nullopt, ""},
  };
  for (const Case& c : cases) {
    auto plugin = MakeBuiltinPlugin(c.plugin, nullptr);
    ASSERT_TRUE(plugin.ok());
    auto* filter = dynamic_cast<DeviceFilterPlugin*>(plugin->get());
    ASSERT_NE(filter, nullptr) << c.plugin;
    CycleState state(c.request);
    state.qualify.SetNode(node.context);
    const auto verdict = filter->FilterDevice(state, node, c.device);
    ASSERT_EQ(verdict.has_value(), c.expected.has_value()) << c.plugin << " " << c.device.device->id;
    if (!verdict) continue;
    EXPECT_EQ(verdict->rejection, *c.expected) << c.plugin;
    EXPECT_NE(verdict->reason.find(c.reason), std::string::npos) << verdict->reason;
  }
  auto schedulable = MakeBuiltinPlugin("NodeSchedulable", nullptr);
  auto* node_filter = dynamic_cast<NodeFilterPlugin*>(schedulable->get());
  PlacementRequest any = Whole(1, 1);
  CycleState state(any);
  EXPECT_FALSE(node_filter->FilterNode(state, node).has_value());
  NodeView drained = node;
  drained.schedulable = false;
  EXPECT_EQ(node_filter->FilterNode(state, drained)->rejection, Rejection::kWaiting);
}

// --- scores -------------------------------------------------------------------------------------

TEST(SchedulerPlugins, BestFitAndSpreadPullOppositeWays) {
  Pool pool(2, 8, {6, 2});  // n0: 2 free, n1: 6 free
  auto best_fit = FrameworkFromProfile(Profile(R"(["BestFit"])"));
  auto spread = FrameworkFromProfile(Profile(R"(["Spread"])"));
  ASSERT_TRUE(best_fit.ok() && spread.ok());
  EXPECT_EQ((*best_fit)->Place(Whole(1, 2), pool.views)->nodes[0].node, "n0");
  EXPECT_EQ((*spread)->Place(Whole(1, 2), pool.views)->nodes[0].node, "n1");
}

// Issue 61, item 6: a degraded card runs jobs, last. On its node the well cards go first; across
// nodes, the default profile's HealthyCards outweighs packing; with nothing else free, it is used.
TEST(SchedulerPlugins, DegradedCardsArePlacedLast) {
  Pool pool(2, 4, {2, 0});  // n0: cards 2 and 3 free (packing prefers it); n1: all four free
  auto framework = FrameworkFromProfile(DefaultProfileJson());
  ASSERT_TRUE(framework.ok()) << framework.status();
  auto degrade = [&](int node, int card) {
    pool.devices[static_cast<size_t>(node)][static_cast<size_t>(card)].signals.push_back(
        {Severity::kDegraded, "PCIe link x8 of x16", "nvml"});
  };
  auto where = [&](const PlacementRequest& r) {
    auto p = (*framework)->Place(r, pool.views);
    return p.ok() ? absl::StrCat(p->nodes[0].node, "/", p->nodes[0].device_ids[0]) : std::string("none");
  };
  EXPECT_EQ(where(Whole(1, 1)), "n0/nvidia2");
  degrade(0, 2);
  EXPECT_EQ(where(Whole(1, 1)), "n0/nvidia3");  // the well card of the same node
  PlacementRequest share = Whole(1, 1);
  share.device_milli = 500;
  EXPECT_EQ(where(share), "n0/nvidia3");
  degrade(0, 3);
  EXPECT_EQ(where(Whole(1, 1)), "n1/nvidia0");  // another node, rather than a degraded card
  EXPECT_EQ(where(share).substr(0, 3), "n1/");
  for (int card = 0; card < 4; ++card) degrade(1, card);
  EXPECT_EQ(where(Whole(1, 1)).substr(0, 3), "n0/");  // all degraded: still placed
}

TEST(SchedulerPlugins, NormalizeScoreIsMinMax) {
  auto plugin = MakeBuiltinPlugin("BestFit", nullptr);
  auto* score = dynamic_cast<ScorePlugin*>(plugin->get());
  std::vector<int64_t> raw = {-6, -2, -4};
  score->NormalizeScore(raw);
  EXPECT_EQ(raw, (std::vector<int64_t>{0, 100, 50}));
  std::vector<int64_t> same = {7, 7};
  score->NormalizeScore(same);
  EXPECT_EQ(same, (std::vector<int64_t>{100, 100}));
}

// FGD keeps capacity usable by the recent mix: with 4-card jobs common, a 1-card job goes where
// the rest still takes a 4-card job (5 free -> 4), not where it would strand 3 cards (4 -> 3),
// which is where plain best fit would put it.
TEST(SchedulerPlugins, FgdFollowsTheRecentShapeMix) {
  auto fgd = FrameworkFromProfile(Profile(R"([{"name": "Fgd", "args": {"window": 10}}])"));
  auto best_fit = FrameworkFromProfile(Profile(R"(["BestFit"])"));
  ASSERT_TRUE(fgd.ok() && best_fit.ok());
  // Teach the mix: three 4-card placements on an empty pool.
  struct NoopBinder : Binder {
    absl::Status Bind(const Placement&) override { return absl::OkStatus(); }
  } binder;
  for (int i = 0; i < 3; ++i) {
    Pool empty(1, 8);
    ASSERT_TRUE((*fgd)->Schedule(Whole(1, 4), empty.views, binder).ok());
  }
  Pool pool(2, 8, {4, 3});  // n0: 4 free, n1: 5 free
  EXPECT_EQ((*fgd)->Place(Whole(1, 1), pool.views)->nodes[0].node, "n1");
  EXPECT_EQ((*best_fit)->Place(Whole(1, 1), pool.views)->nodes[0].node, "n0");
}

// The mix declared to the framework reaches Fgd ("mix": "expected"), with nothing placed yet.
TEST(SchedulerPlugins, FgdWeighsTheDeclaredMix) {
  auto fgd = FrameworkFromProfile(Profile(R"([{"name": "Fgd", "args": {"mix": "expected"}}])"));
  ASSERT_TRUE(fgd.ok()) << fgd.status();
  (*fgd)->ExpectWorkload({{0, 4, 1000, {}, 1.0}});
  Pool pool(2, 8, {4, 3});  // n0: 4 free, n1: 5 free
  EXPECT_EQ((*fgd)->Place(Whole(1, 1), pool.views)->nodes[0].node, "n1");
}

// A share goes on the card the score plugins that read the device choice like best: with
// half-card jobs expected, 400 milli goes on the idle card (600 left still takes a half) rather
// than on the half-free one, where best fit would put it (100 left, useless).
TEST(SchedulerPlugins, ScoresChooseTheCardOfAShare) {
  Pool pool(1, 2);
  pool.views[0].devices[1].free = false;
  pool.views[0].devices[1].milli_free = 500;
  pool.views[0].devices[1].memory_free_mib = 40960;
  PlacementRequest share = Whole(1, 1);
  share.device_milli = 400;
  auto fgd = FrameworkFromProfile(Profile(R"([{"name": "Fgd", "args": {"mix": "expected"}}])"));
  auto best_fit = FrameworkFromProfile(Profile(R"(["BestFit"])"));
  ASSERT_TRUE(fgd.ok() && best_fit.ok());
  (*fgd)->ExpectWorkload({{0, 1, 500, {}, 1.0}});
  EXPECT_EQ((*fgd)->Place(share, pool.views)->nodes[0].device_ids[0], "nvidia0");
  EXPECT_EQ((*best_fit)->Place(share, pool.views)->nodes[0].device_ids[0], "nvidia1");
}

// CPU jobs are scored like device jobs: TieRank sends one where the least GPU is free, so the
// CPU it takes strands the least.
TEST(SchedulerPlugins, CpuJobsAreScoredToo) {
  Pool pool(3, 8, {2, 6, 4});
  auto framework = FrameworkFromProfile(Profile(R"(["TieRank"])"));
  ASSERT_TRUE(framework.ok()) << framework.status();
  auto p = (*framework)->Place(Whole(1, 0), pool.views);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->vendor, Vendor::kCpu);
  EXPECT_EQ(p->nodes[0].node, "n1");
  EXPECT_TRUE(p->nodes[0].device_ids.empty());
}

// Without a score that reads the device choice, a share goes where best fit puts it.
TEST(SchedulerPlugins, FractionalSharesPackOntoPartlyUsedCards) {
  Pool pool(1, 2);
  auto made = FrameworkFromProfile(Profile(R"(["BestFit"])"));
  ASSERT_TRUE(made.ok()) << made.status();
  Framework* framework = made->get();
  PlacementRequest quarter = Whole(1, 1);
  quarter.device_milli = 250;
  pool.views[0].devices[1].free = false;
  pool.views[0].devices[1].milli_free = 500;
  auto p = framework->Place(quarter, pool.views);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->nodes[0].device_ids[0], "nvidia1");  // the half-used card, not the idle one
  EXPECT_EQ(p->nodes[0].device_milli, 250);
  EXPECT_EQ(p->nodes[0].device_memory_mib, 81920u / 4);
}

// --- Reserve / Bind / Unreserve -------------------------------------------------------------------

class CountingReserve final : public ReservePlugin {
 public:
  absl::string_view Name() const override { return "CountingReserve"; }
  void Reserve(const PlacementRequest&, const Placement&) override { ++reserved; }
  void Unreserve(const PlacementRequest&, const Placement&) override { --reserved; }
  int reserved = 0;
};

TEST(SchedulerFramework, BindFailureUnreserves) {
  // A framework assembled by hand, with a custom plugin next to the built-in ones.
  Framework::Plugins plugins;
  for (const char* name : {"Fingerprint", "DeviceHealth", "Capacity"}) {
    auto p = MakeBuiltinPlugin(name, nullptr);
    plugins.owned.push_back(*p);
    plugins.device_filter.push_back(dynamic_cast<DeviceFilterPlugin*>(p->get()));
  }
  auto gang = MakeBuiltinPlugin("Gang", nullptr);
  plugins.owned.push_back(*gang);
  plugins.permit.push_back(dynamic_cast<PermitPlugin*>(gang->get()));
  auto counting = std::make_shared<CountingReserve>();
  plugins.owned.push_back(counting);
  plugins.reserve.push_back(counting.get());
  Framework framework(std::move(plugins));

  struct Binders : Binder {
    absl::Status result;
    absl::Status Bind(const Placement&) override { return result; }
  } binder;
  Pool pool(1, 8);
  binder.result = absl::UnavailableError("store down");
  EXPECT_EQ(framework.Schedule(Whole(1, 2), pool.views, binder).status().message(), "store down");
  EXPECT_EQ(counting->reserved, 0);
  binder.result = absl::OkStatus();
  EXPECT_TRUE(framework.Schedule(Whole(1, 2), pool.views, binder).ok());
  EXPECT_EQ(counting->reserved, 1);
}

// --- pending reasons ------------------------------------------------------------------------------

TEST(SchedulerFramework, PendingReasonsSayWhatIsNeededAndWhatTurnedNodesAway) {
  Pool pool(3, 8, {6, 8, 0});  // n0: 2 free, n1: none, n2: drained with 8
  pool.views[2].schedulable = false;
  auto framework = DefaultFramework();
  PlacementRequest four = Whole(1, 4);
  four.requirements.run.precisions = {Precision::kBf16};
  four.requirements.run.min_memory_mib = 65536;
  auto waiting = framework->Place(four, pool.views);
  ASSERT_EQ(waiting.status().code(), absl::StatusCode::kUnavailable);
  auto why = PendingReasonOf(waiting.status());
  ASSERT_TRUE(why.has_value());
  EXPECT_FALSE(why->never);
  EXPECT_EQ(why->needs, "1 node x 4 devices of one vendor (bf16, >= 64 GiB)");
  EXPECT_EQ(why->closest, "most free qualifying devices on one node: 2 (n0)");
  EXPECT_EQ(why->nodes_rejected, (std::map<std::string, int>{{"Capacity", 2}, {"NodeSchedulable", 1}}));
  EXPECT_EQ(why->Message(),
            "waiting for capacity: needs 1 node x 4 devices of one vendor (bf16, >= 64 GiB); most free qualifying "
            "devices on one node: 2 (n0); nodes turned away by Capacity 2, NodeSchedulable 1");

  PlacementRequest fp8 = Whole(1, 1);
  fp8.requirements.vendors = {Vendor::kCambricon};
  auto never = framework->Place(fp8, pool.views);
  ASSERT_EQ(never.status().code(), absl::StatusCode::kFailedPrecondition);
  why = PendingReasonOf(never.status());
  ASSERT_TRUE(why.has_value());
  EXPECT_TRUE(why->never);
  EXPECT_EQ(why->nodes_rejected, (std::map<std::string, int>{{"Fingerprint", 3}}));
  ASSERT_EQ(why->device_reasons.size(), 1u);
  EXPECT_NE(why->device_reasons[0].find("not an allowed vendor"), std::string::npos) << why->device_reasons[0];
  EXPECT_EQ(why->Message().rfind("can never run in this pool: needs 1 node x 1 device of one vendor (cambricon)", 0),
            0u)
      << why->Message();
}

TEST(SchedulerFramework, GangsArePlacedWholeOrNotAtAll) {
  Pool pool(3, 8, {0, 0, 4});  // two whole nodes and one half node
  auto framework = DefaultFramework();
  auto two = framework->Place(Whole(2, 8), pool.views);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->nodes.size(), 2u);
  auto three = framework->Place(Whole(3, 8), pool.views);
  EXPECT_EQ(three.status().code(), absl::StatusCode::kUnavailable);  // never a partial gang
  EXPECT_EQ(framework->Place(Whole(4, 8), pool.views).status().code(), absl::StatusCode::kFailedPrecondition);
}

// --- what a decision keeps between calls ------------------------------------------------------

TEST(SchedulerFramework, ContentGenerationFollowsWhatPlacementReads) {
  Pool pool(2, 2);
  const uint64_t n0 = ContentGeneration(pool.views[0]);
  EXPECT_NE(n0, 0u);
  EXPECT_EQ(ContentGeneration(pool.views[0]), n0);
  EXPECT_NE(ContentGeneration(pool.views[1]), n0) << "same content, other node: another generation";
  NodeView changed = pool.views[0];
  changed.devices[1].free = false;
  EXPECT_NE(ContentGeneration(changed), n0);
  changed = pool.views[0];
  changed.devices[0].milli_free = 500;
  EXPECT_NE(ContentGeneration(changed), n0);
  changed = pool.views[0];
  changed.schedulable = false;
  EXPECT_NE(ContentGeneration(changed), n0);
  pool.devices[0][1].healthy = false;
  EXPECT_NE(ContentGeneration(pool.views[0]), n0);
}

// Two frameworks take the same random jobs on the same pool: one sees views with generations
// (and reuses its summaries), the other views without (and derives everything each call). Every
// decision must agree, placements and refusals alike.
// A busy card over its owner's quota waits on both: the pending reason names every filter that
// made it wait, so the daemon knows the job is over quota even when the pool is full too.
TEST(SchedulerFramework, EveryFilterThatMakesACardWaitIsInTheReason) {
  Pool pool(2, 2, {2, 0});                                             // n0: both cards busy; n1: both free
  for (NodeView& v : pool.views) v.generation = ContentGeneration(v);  // refusals may be remembered
  auto framework = DefaultFramework();
  PlacementRequest r = Whole(1, 2);
  r.quota_blocked = [](const DeviceRecord&) -> std::optional<std::string> {
    return "quota: user carol holds 2 of 2 cards";
  };
  r.quota_owner = "carol/";
  auto placed = framework->Place(r, pool.views);
  ASSERT_FALSE(placed.ok());
  EXPECT_TRUE(absl::IsUnavailable(placed.status())) << placed.status();
  const auto why = PendingReasonOf(placed.status());
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(why->waiting_reasons.at("Quota"), "quota: user carol holds 2 of 2 cards");
  EXPECT_EQ(why->waiting_reasons.at("Capacity"), "in use");
  EXPECT_NE(placed.status().message().find("(quota: user carol holds 2 of 2 cards)"), std::string::npos)
      << placed.status();
  // Another owner with no quota is placed on the same views (the refusal is remembered per owner).
  PlacementRequest free_owner = Whole(1, 2);
  EXPECT_TRUE(framework->Place(free_owner, pool.views).ok());
}

TEST(RefusalMemo, RefusesAgainOnlyTheSameRequestOnUnchangedViews) {
  Pool pool(3, 8);
  for (NodeView& v : pool.views) v.generation = ContentGeneration(v);
  const uint64_t key = RefusalMemo::ViewsKey(pool.views);
  ASSERT_NE(key, 0u);
  RefusalMemo memo;
  PlacementRequest eight = Whole(4, 8);
  memo.Remember(RefusalMemo::RequestKey(eight), key, absl::UnavailableError("needs 4 nodes"));
  ASSERT_TRUE(memo.Find(RefusalMemo::RequestKey(eight), key).has_value());
  EXPECT_EQ(memo.Find(RefusalMemo::RequestKey(eight), key)->message(), "needs 4 nodes");
  // Whether to work the views' key out at all: only for a request refused before.
  EXPECT_TRUE(memo.Knows(RefusalMemo::RequestKey(eight)));
  PlacementRequest other = eight;
  other.requirements.run.min_memory_mib = 1;  // any field of the request tells them apart
  EXPECT_FALSE(memo.Knows(RefusalMemo::RequestKey(other)));
  EXPECT_FALSE(memo.Find(RefusalMemo::RequestKey(other), key).has_value());
  other = eight;
  other.cpu_milli = 1000;
  EXPECT_FALSE(memo.Find(RefusalMemo::RequestKey(other), key).has_value());
  pool.views[1].devices[0].free = false;  // a view changed
  pool.views[1].generation = ContentGeneration(pool.views[1]);
  EXPECT_FALSE(memo.Find(RefusalMemo::RequestKey(eight), RefusalMemo::ViewsKey(pool.views)).has_value());
  pool.views[2].generation = 0;  // unknown views are never remembered
  EXPECT_EQ(RefusalMemo::ViewsKey(pool.views), 0u);
  memo.Remember(RefusalMemo::RequestKey(eight), 0, absl::UnavailableError("x"));
  EXPECT_FALSE(memo.Find(RefusalMemo::RequestKey(eight), 0).has_value());
}

// Two frameworks decided job `j` alike: both placed it on the same nodes and cards, or both
// refused it with the same status and reason.
void ExpectSameDecision(const absl::StatusOr<Placement>& a, const absl::StatusOr<Placement>& b, int j) {
  ASSERT_EQ(a.ok(), b.ok()) << "job " << j << ": " << (a.ok() ? b.status() : a.status());
  if (!a.ok()) {
    EXPECT_EQ(a.status(), b.status()) << "job " << j;
    return;
  }
  ASSERT_EQ(a->nodes.size(), b->nodes.size());
  for (size_t k = 0; k < a->nodes.size(); ++k) {
    EXPECT_EQ(a->nodes[k].node, b->nodes[k].node) << "job " << j;
    EXPECT_EQ(a->nodes[k].device_ids, b->nodes[k].device_ids) << "job " << j;
  }
}

TEST(SchedulerFramework, KeptSummariesDecideAsFreshOnes) {
  Pool kept(40, 8), fresh(40, 8);
  for (size_t n = 0; n < kept.views.size(); ++n) {
    if (n % 5 == 4) {  // some nodes of another vendor
      for (size_t c = 0; c < 8; ++c) {
        for (Pool* p : {&kept, &fresh}) p->devices[n][c] = Card(static_cast<int>(c), Vendor::kMetax, "MetaX C500");
      }
    }
    kept.views[n].generation = ContentGeneration(kept.views[n]);
  }
  auto with = DefaultFramework(), without = DefaultFramework();
  std::mt19937 rng(7);
  int placed = 0, refused = 0;
  for (int j = 0; j < 400; ++j) {
    PlacementRequest r = Whole(1 + static_cast<int>(rng() % 4 == 0), std::array{1, 2, 4, 8}[rng() % 4]);
    if (rng() % 3 == 0) {
      r = Whole(1, 1);
      r.device_milli = 250 * static_cast<int32_t>(1 + rng() % 3);
    }
    if (rng() % 4 == 0) r.requirements.vendors = {Vendor::kMetax};
    auto a = with->Place(r, kept.views);
    auto b = without->Place(r, fresh.views);
    ASSERT_NO_FATAL_FAILURE(ExpectSameDecision(a, b, j));
    ++(a.ok() ? placed : refused);
    // Apply the placement to both pools; only the kept pool's owner says which nodes changed.
    if (!a.ok()) continue;
    for (Pool* p : {&kept, &fresh}) {
      for (const NodeAssignment& na : a->nodes) {
        NodeView& v = p->views[static_cast<size_t>(std::stoi(na.node.substr(1)))];
        for (DeviceView& dv : v.devices) {
          if (std::find(na.device_ids.begin(), na.device_ids.end(), dv.device->id) == na.device_ids.end()) continue;
          dv.free = false;
          dv.milli_free -= na.device_milli;
          dv.memory_free_mib -= std::min(dv.memory_free_mib, na.device_memory_mib);
        }
        if (p == &kept) v.generation = ContentGeneration(v);
      }
    }
  }
  EXPECT_GT(placed, 50);
  EXPECT_GT(refused, 50);
}

// The free-capacity index passes over nodes that cannot hold an ask; decisions and refusals
// (their reasons too) must be those of a framework that reads every node, while jobs come and go,
// on a pool of several vendors with host CPU and memory limits.
TEST(SchedulerFramework, FreeCapacityIndexDecidesAsReadingEveryNode) {
  Pool pool(60, 8);
  for (size_t n = 0; n < pool.views.size(); ++n) {
    const Vendor vendor = n % 4 == 1 ? Vendor::kMetax : n % 4 == 2 ? Vendor::kCambricon : Vendor::kNvidia;
    if (vendor != Vendor::kNvidia) {
      for (size_t c = 0; c < 8; ++c)
        pool.devices[n][c] = Card(static_cast<int>(c), vendor, vendor == Vendor::kMetax ? "MetaX C500" : "MLU370-X8");
    }
    NodeView& v = pool.views[n];
    v.context.torch_devices = {"cuda", "mlu", "cpu"};
    if (n % 3 != 0) {  // the others report no host totals: not limited
      v.cpu_milli_total = v.cpu_milli_free = 64000;
      v.host_memory_total_mib = v.host_memory_free_mib = 512 * 1024;
    }
    v.generation = ContentGeneration(v);
  }
  auto indexed = DefaultFramework(), every = DefaultFramework();
  every->ReadEveryNode();
  std::mt19937 rng(5);
  struct Running {
    PlacementRequest request;
    Placement placement;
  };
  std::vector<Running> running;
  int placed = 0, refused = 0;
  for (int j = 0; j < 600; ++j) {
    PlacementRequest r = Whole(1 + static_cast<int>(rng() % 5 == 0), std::array{1, 2, 4, 8}[rng() % 4]);
    if (rng() % 3 == 0) {
      r = Whole(1, 1);
      r.device_milli = 250 * static_cast<int32_t>(1 + rng() % 3);
    }
    r.cpu_milli = std::array<int64_t, 3>{0, 8000, 40000}[rng() % 3];
    r.host_memory_mib = rng() % 4 == 0 ? 200 * 1024 : 0;
    if (rng() % 5 == 0) r.requirements.vendors = {Vendor::kMetax};
    auto a = indexed->Place(r, pool.views);
    auto b = every->Place(r, pool.views);
    ASSERT_NO_FATAL_FAILURE(ExpectSameDecision(a, b, j));
    if (!a.ok()) {
      ++refused;
    } else {
      ++placed;
      TakeOnViews(r, *a, pool.views);
      running.push_back({r, *a});
    }
    // A third of the time a running job ends: its cards and host share come back.
    if (!running.empty() && rng() % 3 == 0) {
      const size_t k = rng() % running.size();
      for (const NodeAssignment& na : running[k].placement.nodes) {
        NodeView& v = pool.views[static_cast<size_t>(std::stoi(na.node.substr(1)))];
        GiveBackOnView(running[k].request, na, v);
        v.generation = ContentGeneration(v);
      }
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(k));
    }
  }
  EXPECT_GT(placed, 150);
  EXPECT_GT(refused, 50);
}

TEST(SchedulerFramework, StopsLookingOnceEnoughNodesFit) {
  EXPECT_EQ(Framework::AdaptiveNodesToFind(50), 50u);
  EXPECT_EQ(Framework::AdaptiveNodesToFind(100), 100u);
  EXPECT_EQ(Framework::AdaptiveNodesToFind(1000), 420u);    // 42%
  EXPECT_EQ(Framework::AdaptiveNodesToFind(5000), 500u);    // 10%
  EXPECT_EQ(Framework::AdaptiveNodesToFind(20000), 1000u);  // 5%
  // Only the first node is looked at when one is enough: a better fit further on is not seen.
  Pool pool(3, 8, {0, 0, 7});
  auto framework = FrameworkFromProfile(
      absl::StrCat(R"({"preFilter": ["RequestShape"], )", kRequired, R"(, "score": ["BestFit"], "nodesToFind": 1})"));
  ASSERT_TRUE(framework.ok()) << framework.status();
  auto one = (*framework)->Place(Whole(1, 1), pool.views);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->nodes[0].node, "n0");
  // Looking at every node, best fit takes the last card of n2.
  auto all = FrameworkFromProfile(Profile(R"(["BestFit"])"));
  ASSERT_TRUE(all.ok());
  EXPECT_EQ((*all)->Place(Whole(1, 1), pool.views)->nodes[0].node, "n2");
  // A gang still gets as many nodes as it needs.
  auto gang = (*framework)->Place(Whole(2, 1), pool.views);
  ASSERT_TRUE(gang.ok()) << gang.status();
  EXPECT_EQ(gang->nodes.size(), 2u);
}

// Issue 44: hetpoold's profile stops at 100 candidates (docs/scheduler.md says what that cost on
// the trace), where Kubernetes' adaptive share of 1,000 nodes is 420. A partly used node 300th
// in view order, the one its scores prefer, is then not seen.
TEST(SchedulerFramework, TheDefaultProfileStopsAtAHundredCandidates) {
  std::vector<int> busy(1000, 0);
  busy[300] = 6;
  Pool pool(1000, 8, busy);
  auto shipped = DefaultFramework()->Place(Whole(1, 1), pool.views);
  ASSERT_TRUE(shipped.ok()) << shipped.status();
  int index = 0;
  ASSERT_TRUE(absl::SimpleAtoi(shipped->nodes[0].node.substr(1), &index)) << shipped->nodes[0].node;
  EXPECT_LT(index, 100);
  nlohmann::json adaptive = nlohmann::json::parse(DefaultProfileJson());
  adaptive["nodesToFind"] = 0;
  auto wider = FrameworkFromProfile(adaptive.dump());
  ASSERT_TRUE(wider.ok()) << wider.status();
  auto seen = (*wider)->Place(Whole(1, 1), pool.views);
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_EQ(seen->nodes[0].node, "n300");
}

}  // namespace
}  // namespace hetpool::scheduler
