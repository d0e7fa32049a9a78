// Fair-share queues (issue 16, item 1): the --queues file, the ledger's decayed usage and
// dominant shares, the FairShare QueueSort plugin, and a scheduling pass that alternates between
// groups instead of serving whoever submitted first.
#include "src/daemon/sharing/fair_share.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "scheduler/framework/profile.h"
#include "scheduler/plugins/builtin.h"
#include "src/daemon/sharing/queue_config.h"
#include "src/daemon/sharing/queue_order.h"
#include "src/daemon/state/scheduling_cycle.h"
#include "tests/testing/state_parts.h"

namespace hetpool::daemon {
namespace {

using testing::StateParts;
using testing::TrainingSpec;

const CardClass kH100{"nvidia", "fp-h100"};
const CardClass kMlu{"cambricon", "fp-mlu590"};

TEST(QueueConfig, ParsesWeightsNominalCardsAndTheHalfLife) {
  auto config = QueueConfig::Parse(R"({"usage_half_life": "12h", "default_weight": 2,
      "groups": {"vision": {"weight": 3, "nominal": {"*": 16, "nvidia": 8.5}}, "nlp": {}}})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->usage_half_life, absl::Hours(12));
  EXPECT_EQ(config->For("vision").weight, 3);
  EXPECT_EQ(config->For("vision").nominal_milli.at("nvidia"), 8500);
  EXPECT_EQ(config->For("nlp").weight, 2) << "a listed group without a weight takes the default";
  EXPECT_EQ(config->For("unlisted").weight, 2);
  EXPECT_TRUE(config->For("unlisted").nominal_milli.empty());
}

TEST(QueueConfig, ParsesTheWeightsOfAGroupsUsers) {
  auto config = QueueConfig::Parse(R"({"groups": {"vision": {"users": {"alice": {"weight": 3}, "bob": {}}}}})");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->For("vision").user_weights, (std::map<std::string, double>{{"alice", 3}, {"bob", 1}}));
  EXPECT_TRUE(config->For("nlp").user_weights.empty());
}

TEST(QueueConfig, TheExampleFileParses) {
  std::ifstream in(HETPOOL_SOURCE_DIR_FOR_TESTS "/deploy/examples/queues.json");
  std::stringstream text;
  text << in.rdbuf();
  auto config = QueueConfig::Parse(text.str());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->groups.size(), 3u);
  EXPECT_EQ(config->For("infra").nominal_milli.at("nvidia"), 2000);
}

TEST(QueueConfig, ErrorsNameTheKeyThatIsWrong) {
  const std::pair<const char*, const char*> cases[] = {
      {"[]", "expected a JSON object"},
      {R"({"usage_half_life": "soon"})", "usage_half_life"},
      {R"({"usage_half_life": "0s"})", "usage_half_life"},
      {R"({"default_weight": 0})", "default_weight"},
      {R"({"groups": {"a": {"weight": -1}}})", "groups[a].weight"},
      {R"({"groups": {"a": {"nominal": {"*": "many"}}}})", "groups[a].nominal[*]"},
      {R"({"groups": {"a": {"quota": 3}}})", "unknown key 'quota'"},
      {R"({"groups": {"a": {"users": []}}})", "groups[a].users"},
      {R"({"groups": {"a": {"users": {"bob": {"weight": 0}}}}})", "groups[a].users[bob].weight"},
      {R"({"groups": {"a": {"users": {"bob": {"share": 1}}}}})", "unknown key 'share'"},
      {R"({"groups": {"a": {"users": {"": {}}}}})", "user names must be 1-64 characters"},
      {R"({"grups": {}})", "grups"},
  };
  for (const auto& [text, expected] : cases) {
    auto config = QueueConfig::Parse(text);
    ASSERT_FALSE(config.ok()) << text;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(config.status().message().find(expected), std::string::npos) << config.status();
  }
}

// Holdings by group, each group's cards all held by one user.
std::map<std::string, UserHoldings> OneUserEach(const std::map<std::string, CardHoldings>& by_group) {
  std::map<std::string, UserHoldings> out;
  for (const auto& [group, cards] : by_group) out[group]["u"] = cards;
  return out;
}

QueueConfig HalfLife(absl::Duration half_life) {
  QueueConfig config;
  config.usage_half_life = half_life;
  return config;
}

TEST(FairShareLedger, ClassSharesSayWhoBorrowsWhichCards) {
  QueueConfig config = HalfLife(absl::Hours(1));
  config.groups["a"] = GroupQueue{};
  config.groups["b"] = GroupQueue{};
  config.groups["infra"] = GroupQueue{1, {{"nvidia", 2000}}};
  FairShareLedger ledger(config);
  const absl::Time t0 = absl::FromUnixSeconds(1'800'000'000);
  // 10 H100s (2 infra's, 4 each for a and b), 8 MLUs (4 each for a and b).
  ledger.Observe(t0, {{kH100, 10000}, {kMlu, 8000}}, OneUserEach({{"a", {{kH100, 8000}}}, {"b", {{kMlu, 2000}}}}));
  EXPECT_DOUBLE_EQ(ledger.ClassShare("a", kH100), 2.0);  // borrows H100s
  EXPECT_DOUBLE_EQ(ledger.ClassShare("a", kMlu), 0.0);
  EXPECT_DOUBLE_EQ(ledger.ClassShare("b", kH100, 1000), 0.25);  // may reclaim one: stays below
  EXPECT_DOUBLE_EQ(ledger.ClassShare("b", kMlu), 0.5);
  EXPECT_DOUBLE_EQ(ledger.ClassShare("infra", kH100, 2000), 1.0);
  EXPECT_GT(ledger.ClassShare("infra", kMlu, 1000), 1e6) << "entitled to no MLU at all";
  EXPECT_DOUBLE_EQ(ledger.ClassShare("infra", kMlu), 0.0);
}

TEST(FairShareLedger, UsageDecaysWithTheHalfLifeAndHoldingsCountAtOnce) {
  FairShareLedger ledger(HalfLife(absl::Hours(1)));
  const absl::Time t0 = absl::FromUnixSeconds(1'800'000'000);
  const CardHoldings pool = {{kH100, 8000}};
  ledger.Observe(t0, pool, OneUserEach({{"a", {{kH100, 4000}}}}));
  // Held now counts at once: 4 of its 4 (half of 8, equal weights with b) entitled cards.
  ledger.Observe(t0, pool, OneUserEach({{"a", {{kH100, 4000}}}, {"b", {}}}));
  EXPECT_DOUBLE_EQ(ledger.Share("a"), 1.0);
  // After one half-life of holding 4, the decayed average is 4 * (1 - 1/2) = 2.
  ledger.Observe(t0 + absl::Hours(1), pool, OneUserEach({{"b", {}}}));
  auto groups = ledger.Groups();
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_NEAR(groups[0].decayed, 2.0, 1e-9);
  EXPECT_EQ(groups[0].used, 0);
  // Released: its share is what it is remembered for, halving every hour.
  EXPECT_NEAR(ledger.Share("a"), 2.0 / 4, 1e-9);
  ledger.Observe(t0 + absl::Hours(2), pool, OneUserEach({{"b", {}}}));
  EXPECT_NEAR(ledger.Share("a"), 1.0 / 4, 1e-9);
  EXPECT_EQ(ledger.Share("b"), 0);
}

TEST(FairShareLedger, PastUsageInClosedFormEqualsObservingIt) {
  const absl::Time t0 = absl::FromUnixSeconds(1'800'000'000);
  const CardHoldings pool = {{kH100, 8000}};
  FairShareLedger observed(HalfLife(absl::Minutes(30)));
  observed.Observe(t0, pool, {});
  observed.Observe(t0 + absl::Minutes(10), pool, OneUserEach({{"a", {{kH100, 3000}}}}));
  observed.Observe(t0 + absl::Minutes(55), pool, {});
  observed.Observe(t0 + absl::Minutes(90), pool, {});
  FairShareLedger restarted(HalfLife(absl::Minutes(30)));
  restarted.Observe(t0 + absl::Minutes(90), pool, {});
  restarted.AddPastUsage("a", "u", kH100, 3000, t0 + absl::Minutes(10), t0 + absl::Minutes(55));
  ASSERT_EQ(observed.Groups().size(), 1u);
  ASSERT_EQ(restarted.Groups().size(), 1u);
  EXPECT_NEAR(observed.Groups()[0].decayed, restarted.Groups()[0].decayed, 1e-9);
  EXPECT_GT(restarted.Groups()[0].decayed, 0.5);
  // The user's own usage, restored the same way.
  ASSERT_EQ(observed.Groups()[0].users.size(), 1u);
  ASSERT_EQ(restarted.Groups()[0].users.size(), 1u);
  EXPECT_NEAR(observed.Groups()[0].users[0].decayed, restarted.Groups()[0].users[0].decayed, 1e-9);
  EXPECT_NEAR(observed.UserShare("a", "u"), restarted.UserShare("a", "u"), 1e-9);
}

TEST(FairShareLedger, AGroupsUsersShareItByWeightAndEachIsRememberedForItsOwnUsage) {
  QueueConfig config = HalfLife(absl::Hours(1));
  config.groups["vision"] = GroupQueue{1, {}, {{"alice", 3}}};  // bob weighs 1
  config.groups["nlp"] = GroupQueue{};
  FairShareLedger ledger(config);
  const absl::Time t0 = absl::FromUnixSeconds(1'800'000'000);
  const CardHoldings pool = {{kH100, 8000}};
  // vision is entitled to 4 H100s: alice to 3 of them, bob to 1.
  ledger.Observe(t0, pool, {{"vision", {{"alice", {{kH100, 3000}}}, {"bob", {{kH100, 1000}}}}}});
  EXPECT_DOUBLE_EQ(ledger.Share("vision"), 1.0) << "the group counts its users' cards together";
  EXPECT_DOUBLE_EQ(ledger.UserShare("vision", "alice"), 1.0) << "3 of her part of the group's 4, not of the pool";
  EXPECT_DOUBLE_EQ(ledger.UserShare("vision", "alice"), ledger.UserShare("vision", "bob"))
      << "3 cards for weight 3 is as much as 1 for weight 1";
  EXPECT_EQ(ledger.UserShare("vision", "carol"), 0) << "a user who used nothing";
  EXPECT_EQ(ledger.UserShare("nlp", "alice"), 0) << "users are counted within their group only";
  // A placement counts at once for its user, not for the others of the group.
  const double bob_before = ledger.UserShare("vision", "bob");
  ledger.Hold("vision", "alice", kH100, 1000);
  EXPECT_GT(ledger.UserShare("vision", "alice"), bob_before);
  EXPECT_DOUBLE_EQ(ledger.UserShare("vision", "bob"), bob_before);
  std::map<std::string, GroupShare> groups;
  for (const GroupShare& g : ledger.Groups()) groups[g.group] = g;
  ASSERT_EQ(groups["vision"].users.size(), 2u);
  const GroupShare& alice = groups["vision"].users[0];
  const GroupShare& bob = groups["vision"].users[1];
  EXPECT_EQ(alice.group, "alice");
  EXPECT_DOUBLE_EQ(alice.entitled, 3) << "its weight's part of the group's 4";
  EXPECT_DOUBLE_EQ(bob.entitled, 1);
  EXPECT_DOUBLE_EQ(alice.used, 4);
  // Everything released: each user is remembered for what it held, halving every hour.
  ledger.Observe(t0 + absl::Hours(1), pool, {});
  ledger.Observe(t0 + absl::Hours(2), pool, {});
  EXPECT_GT(ledger.UserShare("vision", "alice"), 0);
  EXPECT_NEAR(ledger.UserShare("vision", "alice") / ledger.UserShare("vision", "bob"), 4.0 / 3, 1e-9)
      << "alice held 4 for weight 3, bob 1 for weight 1";
}

TEST(FairShareLedger, AUsersPartIsOfWhatItsGroupHasBorrowedCardsIncluded) {
  QueueConfig config;
  config.groups["vision"] = GroupQueue{1, {}, {{"alice", 3}}};  // bob weighs 1
  config.groups["nlp"] = GroupQueue{};
  FairShareLedger ledger(config);
  // vision is entitled to 4 of the 8 H100s and holds 6 (nlp lends it 2): its users share the 6.
  ledger.Observe(absl::FromUnixSeconds(1'800'000'000), {{kH100, 8000}},
                 {{"vision", {{"alice", {{kH100, 5000}}}, {"bob", {{kH100, 1000}}}}}});
  EXPECT_DOUBLE_EQ(ledger.UserShare("vision", "alice"), 5.0 / 4.5);
  EXPECT_DOUBLE_EQ(ledger.UserShare("vision", "bob"), 1.0 / 1.5);
  std::map<std::string, GroupShare> users;
  for (const GroupShare& g : ledger.Groups()) {
    for (const GroupShare& u : g.users) users[u.group] = u;
  }
  // Each row divides: used / entitled is the share, and borrowed is what is held above the part.
  EXPECT_DOUBLE_EQ(users["alice"].entitled, 4.5);
  EXPECT_DOUBLE_EQ(users["alice"].used, 5);
  EXPECT_DOUBLE_EQ(users["alice"].borrowed, 0.5);
  EXPECT_DOUBLE_EQ(users["alice"].share, users["alice"].used / users["alice"].entitled);
  EXPECT_DOUBLE_EQ(users["bob"].entitled, 1.5);
  EXPECT_DOUBLE_EQ(users["bob"].borrowed, 0);
}

TEST(FairShareLedger, DominantShareOverClassesWeightsNominalCardsAndBorrowing) {
  QueueConfig config;
  config.groups["small"] = GroupQueue{1, {}};
  config.groups["big"] = GroupQueue{3, {}};
  config.groups["owner"] = GroupQueue{1, {{"cambricon", 4000}}};
  FairShareLedger ledger(config);
  const CardHoldings pool = {{kH100, 10000}, {kMlu, 10000}};
  // owner owns 4 of the 10 MLUs; small and big (weights 1 and 3) share the rest by weight:
  // small is entitled to 2.5 H100s and 1.5 MLUs, big to 7.5 and 4.5.
  ledger.Observe(
      absl::FromUnixSeconds(1'800'000'000), pool,
      OneUserEach({{"small", {{kH100, 1000}, {kMlu, 2000}}}, {"big", {{kH100, 6000}}}, {"owner", {{kMlu, 6000}}}}));
  EXPECT_DOUBLE_EQ(ledger.Share("small"), 2.0 / 1.5) << "its dominant class is the MLU";
  EXPECT_DOUBLE_EQ(ledger.Share("big"), 6.0 / 7.5);
  EXPECT_DOUBLE_EQ(ledger.Share("owner"), 1.5) << "6 held of a nominal 4";
  std::map<std::string, GroupShare> groups;
  for (const GroupShare& g : ledger.Groups()) groups[g.group] = g;
  EXPECT_EQ(groups["owner"].entitled, 4);
  EXPECT_EQ(groups["owner"].borrowed, 2);
  EXPECT_EQ(groups["owner"].nominal.at("cambricon"), 4);
  EXPECT_DOUBLE_EQ(groups["small"].entitled, 4);
  EXPECT_DOUBLE_EQ(groups["small"].borrowed, 0.5) << "half an MLU above its 1.5";
  EXPECT_DOUBLE_EQ(groups["big"].borrowed, 0);
  // A placement within a pass counts before the next Observe.
  ledger.Hold("small", "u", kMlu, 1000);
  EXPECT_DOUBLE_EQ(ledger.Share("small"), 2.0);
}

TEST(FairShareSort, PriorityFirstThenTheLowerShareThenSubmission) {
  auto plugin = scheduler::MakeBuiltinPlugin("FairShare", nullptr);
  ASSERT_TRUE(plugin.ok());
  auto* sort = dynamic_cast<scheduler::QueueSortPlugin*>(plugin->get());
  ASSERT_NE(sort, nullptr);
  EXPECT_TRUE(sort->Less({5, 9, 2.0}, {1, 1, 0.0}));
  EXPECT_TRUE(sort->Less({1, 9, 0.1}, {1, 1, 0.5}));
  EXPECT_TRUE(sort->Less({1, 1, 0.5}, {1, 9, 0.5}));
  EXPECT_FALSE(sort->Less({1, 1, 0.5}, {1, 1, 0.5}));
}

class FairShareCycleTest : public ::testing::Test {
 protected:
  FairShareCycleTest()
      : ledger_(QueueConfig{}),
        cycle_(parts_.jobs, parts_.nodes, policy_.get(), parts_.reconciler, parts_.wakeups, Options(&ledger_)),
        fifo_cycle_(parts_.jobs, parts_.nodes, policy_.get(), parts_.reconciler, parts_.wakeups, Options(nullptr)) {}
  static CycleOptions Options(FairShareLedger* ledger) {
    CycleOptions options;
    options.fair_share = ledger;
    return options;
  }
  JobEntry& Submit(const std::string& group, int priority = 0, const std::string& user = "alice") {
    pb::JobSpec spec = TrainingSpec(1, 1);
    spec.set_group(group);
    spec.set_user(user);
    spec.set_priority(priority);
    return parts_.Submit(std::move(spec));
  }
  std::map<std::string, int> ScheduledByUser() {
    std::map<std::string, int> out;
    for (const auto& [id, entry] : parts_.jobs.entries()) {
      if (entry.job().state() == pb::JOB_STATE_SCHEDULED) ++out[entry.job().spec().user()];
    }
    return out;
  }
  std::map<std::string, int> ScheduledByGroup() {
    std::map<std::string, int> out;
    for (const auto& [id, entry] : parts_.jobs.entries()) {
      if (entry.job().state() == pb::JOB_STATE_SCHEDULED) ++out[entry.job().spec().group()];
    }
    return out;
  }

  StateParts parts_;
  std::unique_ptr<scheduler::Framework> policy_ = scheduler::DefaultFramework();
  FairShareLedger ledger_;
  SchedulingCycle cycle_;
  SchedulingCycle fifo_cycle_;
};

TEST_F(FairShareCycleTest, OnePassSharesFreedCardsAmongGroupsNotBySubmissionOrder) {
  parts_.Register("a", 4);
  for (int i = 0; i < 6; ++i) Submit("early");
  for (int i = 0; i < 6; ++i) Submit("late");
  cycle_.Run(parts_.now);
  EXPECT_EQ(ScheduledByGroup(), (std::map<std::string, int>{{"early", 2}, {"late", 2}}));
}

TEST_F(FairShareCycleTest, WithinAGroupFreedCardsGoToItsUsersByWeightNotBySubmissionOrder) {
  parts_.Register("a", 8);
  for (int i = 0; i < 8; ++i) Submit("g", 0, "alice");
  for (int i = 0; i < 8; ++i) Submit("g", 0, "bob");
  for (int i = 0; i < 8; ++i) Submit("h", 0, "carol");
  cycle_.Run(parts_.now);
  // The groups halve the 8 cards; within g, alice and bob halve g's 4.
  EXPECT_EQ(ScheduledByUser(), (std::map<std::string, int>{{"alice", 2}, {"bob", 2}, {"carol", 4}}));
}

TEST_F(FairShareCycleTest, AUsersWeightWithinItsGroupSetsItsPart) {
  QueueConfig config;
  config.groups["g"] = GroupQueue{1, {}, {{"alice", 3}}};
  ledger_.Reconfigure(config);
  parts_.Register("a", 4);
  for (int i = 0; i < 6; ++i) Submit("g", 0, "bob");
  for (int i = 0; i < 6; ++i) Submit("g", 0, "alice");
  cycle_.Run(parts_.now);
  EXPECT_EQ(ScheduledByUser(), (std::map<std::string, int>{{"alice", 3}, {"bob", 1}}));
}

TEST_F(FairShareCycleTest, WithoutALedgerTheOrderIsPriorityThenSubmission) {
  parts_.Register("a", 4);
  for (int i = 0; i < 6; ++i) Submit("early");
  for (int i = 0; i < 6; ++i) Submit("late");
  fifo_cycle_.Run(parts_.now);
  EXPECT_EQ(ScheduledByGroup(), (std::map<std::string, int>{{"early", 4}}));
}

TEST_F(FairShareCycleTest, PriorityStillComesFirstAndPastUsageCountsAgainstAGroup) {
  parts_.Register("a", 4);
  ledger_.Observe(parts_.now, {}, {});
  ledger_.AddPastUsage("heavy", "u", {"nvidia", parts_.nodes.Find("a")->inventory.devices[0].fingerprint}, 4000,
                       parts_.now - absl::Hours(100), parts_.now);  // about 3.8 cards remembered
  for (int i = 0; i < 4; ++i) Submit("heavy");
  for (int i = 0; i < 4; ++i) Submit("light");
  Submit("heavy", /*priority=*/10);
  cycle_.Run(parts_.now + absl::Seconds(1));
  // The urgent job first; then the light group, which used nothing, takes the rest.
  EXPECT_EQ(ScheduledByGroup(), (std::map<std::string, int>{{"heavy", 1}, {"light", 3}}));
}

TEST(QueueOrder, OneGroupsJobsKeepThePolicysOrder) {
  StateParts parts;
  auto policy = scheduler::DefaultFramework();
  FairShareLedger ledger{QueueConfig{}};
  std::vector<JobEntry*> pending;
  for (int priority : {0, 7, 3}) {
    pb::JobSpec spec = TrainingSpec(1, 1);
    spec.set_group("g");
    spec.set_priority(priority);
    pending.push_back(&parts.Submit(std::move(spec)));
  }
  QueueOrder order(pending, *policy, &ledger);
  std::vector<int> priorities;
  while (JobEntry* e = order.Next()) priorities.push_back(e->job().spec().priority());
  EXPECT_EQ(priorities, (std::vector<int>{7, 3, 0}));
}

}  // namespace
}  // namespace hetpool::daemon
