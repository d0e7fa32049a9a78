// Preemption (issue 16, item 2): the victim choice on its own (sharing/preemption.h), and the
// scheduling cycle's preemption stage over the in-memory parts with the daemon's default policy:
// who is stopped, how (requeued, restarts not spent, the job's grace on the kill order), that the
// cards go to the job that preempted, and when nothing is stopped; defragmentation's moves; and
// the elastic stage: how large an elastic job starts, when it grows and for whom it shrinks.
#include "src/daemon/sharing/preemption.h"

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "scheduler/framework/profile.h"
#include "src/daemon/state/scheduling_cycle.h"
#include "tests/testing/state_parts.h"

namespace hetpool::daemon {
namespace {

using ::testing::HasSubstr;
using testing::StateParts;
using testing::TrainingSpec;

// --- The victim choice

CardOffer Card(const std::string& id, std::vector<std::pair<const PreemptibleJob*, int32_t>> holders,
               int32_t milli_free = 0) {
  CardOffer card;
  card.device_id = id;
  card.vendor = Vendor::kNvidia;
  card.free = holders.empty();
  card.milli_free = holders.empty() ? 1000 : milli_free;
  card.holders = std::move(holders);
  return card;
}

// A pool model for `fits`: the job fits when at least `need` cards of one node are free or held
// only by victims.
FitsWithout CountingFits(const std::vector<NodeOffer>& offers, int need) {
  return [&offers, need](const std::set<std::string>& victims) -> absl::StatusOr<scheduler::Placement> {
    for (const auto& node : offers) {
      int freed = 0;
      for (const auto& card : node.cards) {
        bool all = true;
        for (const auto& [job, milli] : card.holders) all = all && job != nullptr && victims.contains(job->id);
        freed += all ? 1 : 0;
      }
      if (freed >= need) {
        scheduler::Placement p;
        p.nodes.push_back({node.node, {}, 0, 1000, 0});
        return p;
      }
    }
    return absl::UnavailableError("does not fit");
  };
}

TEST(ChooseVictims, StopsTheJobsThatLoseTheLeastWork) {
  PreemptibleJob old_job{"old", 100, {}}, young{"young", 10, {}}, middle{"middle", 50, {}};
  std::vector<NodeOffer> offers = {
      {"a",
       {Card("c0", {{&old_job, 1000}}), Card("c1", {{&young, 1000}}), Card("c2", {{&middle, 1000}}), Card("c3", {})}}};
  auto choice = ChooseVictims({1, 2, 1000}, offers, CountingFits(offers, 2));
  ASSERT_TRUE(choice.has_value());
  ASSERT_EQ(choice->victims.size(), 1u);
  EXPECT_EQ(choice->victims[0]->id, "young");
  EXPECT_EQ(choice->placement.nodes.at(0).node, "a");
}

TEST(ChooseVictims, AJobLargerThanTheWaitingOneGoesOnlyWhenNothingElseWould) {
  // The gang lost less work, but freeing its eight cards for one would requeue it for eight.
  PreemptibleJob gang{"gang", 80, {}, 8}, single{"single", 3600, {}, 1};
  std::vector<NodeOffer> offers = {{"a", {Card("c0", {{&gang, 1000}}), Card("c1", {{&single, 1000}})}}};
  auto choice = ChooseVictims({1, 1, 1000}, offers, CountingFits(offers, 1));
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->victims.at(0)->id, "single");
  offers[0].cards.pop_back();  // only the gang's card is left to free
  choice = ChooseVictims({1, 1, 1000}, offers, CountingFits(offers, 1));
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->victims.at(0)->id, "gang");
}

TEST(ChooseVictims, TriesTheNextCheapestNodeWhenTheCheapestSetDoesNotFit) {
  // Node a is cheaper, but the pool refuses its victim (a move that would not fit elsewhere, say):
  // b's is stopped instead of nothing.
  PreemptibleJob stuck{"stuck", 10, {}}, costlier{"costlier", 20, {}};
  std::vector<NodeOffer> offers = {{"a", {Card("c0", {{&stuck, 1000}})}}, {"b", {Card("c0", {{&costlier, 1000}})}}};
  std::vector<std::set<std::string>> asked;
  auto fits = [&](const std::set<std::string>& victims) -> absl::StatusOr<scheduler::Placement> {
    asked.push_back(victims);
    if (victims.contains("stuck")) return absl::UnavailableError("stuck would not fit elsewhere");
    return CountingFits(offers, 1)(victims);
  };
  auto choice = ChooseVictims({1, 1, 1000}, offers, fits);
  ASSERT_TRUE(choice.has_value());
  ASSERT_EQ(choice->victims.size(), 1u);
  EXPECT_EQ(choice->victims[0]->id, "costlier");
  EXPECT_EQ(choice->placement.nodes.at(0).node, "b");
  ASSERT_GE(asked.size(), 2u);
  EXPECT_EQ(asked[0], std::set<std::string>{"stuck"});  // the cheapest was asked first
}

TEST(ChooseVictims, SparesEveryVictimTheJobCanDoWithout) {
  // Freeing c0 takes both its holders; the policy (here: any set with "big") needs only one.
  PreemptibleJob small{"small", 5, {}}, big{"big", 15, {}}, costly{"costly", 1000, {}};
  std::vector<NodeOffer> offers = {{"a", {Card("c0", {{&small, 500}, {&big, 500}}), Card("c1", {{&costly, 1000}})}}};
  int calls = 0;
  auto choice = ChooseVictims({1, 1, 1000}, offers,
                              [&](const std::set<std::string>& victims) -> absl::StatusOr<scheduler::Placement> {
                                ++calls;
                                if (!victims.contains("big")) return absl::UnavailableError("no");
                                return scheduler::Placement{};
                              });
  ASSERT_TRUE(choice.has_value());
  ASSERT_EQ(choice->victims.size(), 1u);
  EXPECT_EQ(choice->victims[0]->id, "big");
  EXPECT_EQ(calls, 3);  // the pair, then without big (no), then without small (yes)
}

TEST(ChooseVictims, AtMostMaxVictimsWhenTheCheapestSetTakesMore) {
  // Node a's two cards are held by three young jobs (the least work); b's by one older job each.
  PreemptibleJob y1{"y1", 10, {}}, y2{"y2", 10, {}}, y3{"y3", 10, {}}, o1{"o1", 100, {}}, o2{"o2", 100, {}};
  std::vector<NodeOffer> offers = {{"a", {Card("c0", {{&y1, 500}, {&y2, 500}}), Card("c1", {{&y3, 1000}})}},
                                   {"b", {Card("c0", {{&o1, 1000}}), Card("c1", {{&o2, 1000}})}}};
  auto cheapest = ChooseVictims({1, 2, 1000}, offers, CountingFits(offers, 2));
  ASSERT_TRUE(cheapest.has_value());
  EXPECT_EQ(cheapest->victims.size(), 3u);
  VictimRequest two_at_most{1, 2, 1000};
  two_at_most.max_victims = 2;
  auto fewer = ChooseVictims(two_at_most, offers, CountingFits(offers, 2));
  ASSERT_TRUE(fewer.has_value());
  ASSERT_EQ(fewer->victims.size(), 2u);
  EXPECT_EQ(fewer->placement.nodes.at(0).node, "b");
  two_at_most.max_victims = 1;
  EXPECT_FALSE(ChooseVictims(two_at_most, offers, CountingFits(offers, 2)).has_value());
}

TEST(ChooseVictims, NothingIsStoppedWhenTheJobWouldStillNotFit) {
  PreemptibleJob low{"low", 1, {}};
  std::vector<NodeOffer> offers = {{"a", {Card("c0", {{&low, 1000}}), Card("c1", {{nullptr, 1000}})}}};
  // A card held by a job that may not be stopped cannot be freed: 2 cards are out of reach.
  EXPECT_FALSE(ChooseVictims({1, 2, 1000}, offers, CountingFits(offers, 2)).has_value());
  // The policy has the last word: with it saying no, nothing is chosen.
  EXPECT_FALSE(
      ChooseVictims({1, 1, 1000}, offers, [](const std::set<std::string>&) -> absl::StatusOr<scheduler::Placement> {
        return absl::UnavailableError("rack");
      }).has_value());
  EXPECT_TRUE(ChooseVictims({1, 1, 1000}, offers, CountingFits(offers, 1)).has_value());
}

TEST(ChooseVictims, AShareOfACardFreesTheCheapestCard) {
  PreemptibleJob third{"third", 50, {}}, half{"half", 5, {}}, whole{"whole", 1, {}};
  std::vector<NodeOffer> offers = {
      {"a", {Card("c0", {{&third, 300}, {&half, 500}}, 200), Card("c1", {{&whole, 1000}}, 0)}}};
  auto choice = ChooseVictims(
      {1, 1, 500}, offers,
      [](const std::set<std::string>&) -> absl::StatusOr<scheduler::Placement> { return scheduler::Placement{}; });
  ASSERT_TRUE(choice.has_value());
  ASSERT_EQ(choice->victims.size(), 1u);
  EXPECT_EQ(choice->victims[0]->id, "whole");
}

TEST(ChooseVictims, HostCpuTheJobNeedsIsFreedToo) {
  // A free card, but the host's CPU is taken: jobs holding CPU are stopped, the cheapest that do.
  PreemptibleJob little{"little", 1, {}}, lots{"lots", 10, {}};
  NodeOffer node{"a", {Card("c0", {})}, true, 1000, 1 << 20, {{&little, 1000, 0}, {&lots, 4000, 0}}};
  std::vector<NodeOffer> offers = {node};
  auto cpu_fits = [&](const std::set<std::string>& victims) -> absl::StatusOr<scheduler::Placement> {
    int64_t cpu = 1000 + (victims.contains("little") ? 1000 : 0) + (victims.contains("lots") ? 4000 : 0);
    if (cpu < 4000) return absl::UnavailableError("host CPU");
    return scheduler::Placement{};
  };
  auto choice = ChooseVictims({1, 1, 1000, 4000, 0}, offers, cpu_fits);
  ASSERT_TRUE(choice.has_value());
  ASSERT_EQ(choice->victims.size(), 1u);  // both were needed by count; the reprieve spares "little"
  EXPECT_EQ(choice->victims[0]->id, "lots");
  // Not enough CPU on the node even with every job stopped: nothing.
  offers[0].host_holders.pop_back();
  EXPECT_FALSE(ChooseVictims({1, 1, 1000, 4000, 0}, offers, cpu_fits).has_value());
}

TEST(ChooseVictims, WorkLostIsWhatRanSinceTheLastCheckpoint) {
  const absl::Time start = absl::FromUnixSeconds(1000);
  EXPECT_DOUBLE_EQ(LostCardSeconds(2, start, absl::ZeroDuration(), start + absl::Seconds(100)), 200);
  EXPECT_DOUBLE_EQ(LostCardSeconds(2, start, absl::Seconds(30), start + absl::Seconds(100)), 20);
  EXPECT_DOUBLE_EQ(LostCardSeconds(0.5, start, absl::Seconds(30), start + absl::Seconds(100)), 5);
  EXPECT_DOUBLE_EQ(LostCardSeconds(2, start, absl::Seconds(30), start), 0);
}

// --- The cycle's stage

class PreemptionCycleTest : public ::testing::Test {
 protected:
  PreemptionCycleTest()
      : ledger_(EqualGroups()),
        cycle_(parts_.jobs, parts_.nodes, policy_.get(), parts_.reconciler, parts_.wakeups,
               Options(PreemptionMode::kPriority, nullptr)),
        reclaiming_cycle_(parts_.jobs, parts_.nodes, policy_.get(), parts_.reconciler, parts_.wakeups,
                          Options(PreemptionMode::kFairShare, &ledger_)) {}
  static QueueConfig EqualGroups() {
    QueueConfig config;
    config.groups["ml"] = GroupQueue{};
    config.groups["vision"] = GroupQueue{};
    return config;
  }
  static CycleOptions Options(PreemptionMode mode, FairShareLedger* ledger) {
    CycleOptions options;
    options.preemption = mode;
    options.fair_share = ledger;
    return options;
  }
  static pb::JobSpec Spec(int nnodes, int cards, int priority, const std::string& group = "") {
    pb::JobSpec spec = TrainingSpec(nnodes, cards);
    spec.set_priority(priority);
    spec.set_group(group);
    return spec;
  }
  // Submitted and placed now, its processes reported running (so it started now).
  JobEntry& Running(pb::JobSpec spec, SchedulingCycle& cycle) {
    JobEntry& entry = parts_.Submit(std::move(spec));
    cycle.Submitted(entry.job().id());
    cycle.Run(parts_.now);
    EXPECT_EQ(entry.job().state(), pb::JOB_STATE_SCHEDULED) << entry.job().message();
    ReportAll();
    EXPECT_EQ(entry.job().state(), pb::JOB_STATE_RUNNING);
    return entry;
  }
  // Every agent acted on its orders: the processes of desired claims run, the rest exited
  // (`exit_codes`: a job's own code, else 0).
  void ReportAll(const std::map<std::string, int>& exit_codes = {}) {
    for (auto& [name, node] : parts_.nodes.entries()) {
      node.applied_version = node.orders_version;
      google::protobuf::RepeatedPtrField<pb::ProcessStatus> reports;
      for (const auto& [key, claim] : node.claims) {
        pb::ProcessStatus& p = *reports.Add();
        p.set_job_id(key.first);
        p.set_generation(key.second);
        const auto code = exit_codes.find(key.first);
        const bool running = claim.desired && code == exit_codes.end();
        p.set_running(running);
        p.set_exited(!running);
        p.set_exit_code(code == exit_codes.end() ? 143 : code->second);
      }
      parts_.reconciler.ApplyProcessReports(node, reports, /*registering=*/false);
    }
  }
  // Submitted now and offered in a pass of `cycle` (it preempts there, or not).
  JobEntry& Offered(pb::JobSpec spec, SchedulingCycle& cycle) {
    JobEntry& entry = parts_.Submit(std::move(spec));
    cycle.Submitted(entry.job().id());
    cycle.Run(parts_.now);
    return entry;
  }
  void Later(absl::Duration d) { parts_.now += d; }

  StateParts parts_;
  std::unique_ptr<scheduler::Framework> policy_ = scheduler::DefaultFramework();
  FairShareLedger ledger_;
  SchedulingCycle cycle_;
  SchedulingCycle reclaiming_cycle_;
};

TEST_F(PreemptionCycleTest, ALowerPriorityJobIsRequeuedAndItsCardsGoToTheJobThatPreemptedIt) {
  parts_.Register("a", 4);
  pb::JobSpec low_spec = Spec(1, 4, 0);
  low_spec.mutable_preemption_grace()->set_seconds(45);
  JobEntry& low = Running(low_spec, cycle_);
  const uint64_t low_generation = low.job().generation();
  Later(absl::Minutes(30));
  JobEntry& high = Offered(Spec(1, 4, 10), cycle_);

  // The victim: back in the queue, no restart spent, the preemption recorded and stored.
  EXPECT_EQ(low.job().state(), pb::JOB_STATE_PENDING);
  EXPECT_EQ(low.job().reason(), "Preempted");
  EXPECT_EQ(low.job().restart_count(), 0);
  EXPECT_EQ(low.job().preemption_count(), 1);
  EXPECT_EQ(low.job().last_preemption().by_job(), high.job().id());
  EXPECT_EQ(low.job().last_preemption().reason(), "priority 0 < 10");
  EXPECT_EQ(low.job().last_preemption().generation(), low_generation);
  EXPECT_NEAR(low.job().last_preemption().card_hours_lost(), 2.0, 1e-9);  // 4 cards x 30 min
  EXPECT_EQ(parts_.store.StoredJob(low.job().id()).reason(), "Preempted");
  EXPECT_NE(low.job().message().find("preempted by job " + high.job().id()), std::string::npos) << low.job().message();
  // Its processes get its own grace; the cards stay held until they are gone.
  const NodeEntry& node = *parts_.nodes.Find("a");
  const pb::Orders orders = parts_.reconciler.OrdersFor(node);
  ASSERT_EQ(orders.kills_size(), 1);
  EXPECT_EQ(orders.kills(0).grace_ms(), 45000);
  EXPECT_EQ(orders.kills(0).reason(), "preempted by job " + high.job().id());
  // The preemptor waits for them and says so.
  EXPECT_EQ(high.job().state(), pb::JOB_STATE_PENDING);
  EXPECT_EQ(high.job().pending().preempting(), low.job().id());
  EXPECT_EQ(high.job().events(high.job().events_size() - 1).reason(), "Preempting");

  // Another pass while the victim stops: nothing more is stopped, nobody else gets the cards.
  parts_.wakeups.CapacityChanged();
  cycle_.Run(parts_.now + absl::Seconds(1));
  EXPECT_EQ(high.job().state(), pb::JOB_STATE_PENDING);
  EXPECT_EQ(low.job().preemption_count(), 1);

  // The victim's processes are gone: the preemptor is placed on its cards, the victim waits.
  ReportAll();
  EXPECT_TRUE(parts_.nodes.Find("a")->claims.empty());
  cycle_.Run(parts_.now + absl::Seconds(2));
  EXPECT_EQ(high.job().state(), pb::JOB_STATE_SCHEDULED);
  EXPECT_EQ(low.job().state(), pb::JOB_STATE_PENDING);

  // Once the preemptor is done, the victim's next generation knows it was preempted.
  ReportAll();
  ReportAll({{high.job().id(), 0}});
  ASSERT_EQ(high.job().state(), pb::JOB_STATE_SUCCEEDED);
  cycle_.Run(parts_.now + absl::Seconds(3));
  ASSERT_EQ(low.job().state(), pb::JOB_STATE_SCHEDULED);
  EXPECT_EQ(low.job().generation(), low_generation + 1);
  ASSERT_EQ(low.job().launch_plan_size(), 1);
  EXPECT_EQ(low.job().launch_plan(0).env().at("HETPOOL_PREEMPTED"), "1");
  EXPECT_EQ(high.job().launch_plan(0).env().count("HETPOOL_PREEMPTED"), 0u);
}

TEST_F(PreemptionCycleTest, EqualPriorityIsNotPreemptedWithoutFairShare) {
  parts_.Register("a", 2);
  JobEntry& first = Running(Spec(1, 2, 5), cycle_);
  Later(absl::Minutes(1));
  JobEntry& second = Offered(Spec(1, 2, 5), cycle_);
  EXPECT_EQ(first.job().state(), pb::JOB_STATE_RUNNING);
  EXPECT_EQ(second.job().state(), pb::JOB_STATE_PENDING);
  EXPECT_EQ(second.job().pending().preempting(), "");
}

TEST_F(PreemptionCycleTest, NothingIsStoppedForAJobThatWouldStillNotFit) {
  parts_.Register("a", 4);
  JobEntry& low = Running(Spec(1, 2, 0), cycle_);
  JobEntry& higher = Running(Spec(1, 2, 20), cycle_);
  Later(absl::Minutes(1));
  JobEntry& waiting = parts_.Submit(Spec(1, 4, 10));  // only by stopping `higher` too
  cycle_.Submitted(waiting.job().id());
  cycle_.Run(parts_.now);
  EXPECT_EQ(low.job().state(), pb::JOB_STATE_RUNNING);
  EXPECT_EQ(higher.job().state(), pb::JOB_STATE_RUNNING);
  EXPECT_EQ(waiting.job().state(), pb::JOB_STATE_PENDING);
  EXPECT_EQ(low.job().preemption_count(), 0);
}

TEST_F(PreemptionCycleTest, AJobPlacedByTheSamePassIsNotUndone) {
  parts_.Register("a", 2);
  JobEntry& low = Running(Spec(1, 2, 0), cycle_);  // placed at `now`, which has not moved
  JobEntry& high = Offered(Spec(1, 2, 10), cycle_);
  EXPECT_EQ(low.job().state(), pb::JOB_STATE_RUNNING);
  Later(absl::Seconds(1));  // a later pass may
  parts_.wakeups.CapacityChanged();
  cycle_.Run(parts_.now);
  EXPECT_EQ(low.job().state(), pb::JOB_STATE_PENDING);
  EXPECT_EQ(high.job().pending().preempting(), low.job().id());
}

TEST_F(PreemptionCycleTest, AJobPlacedAtTheSameInstantIsNotUndoneOnAClockFinerThanNanoseconds) {
  // A placement stores its time in whole nanoseconds; the pass's clock may have quarters of one.
  parts_.now += absl::Nanoseconds(0.25);
  parts_.Register("a", 2);
  JobEntry& low = Running(Spec(1, 2, 0), cycle_);
  Offered(Spec(1, 2, 10), cycle_);
  EXPECT_EQ(low.job().state(), pb::JOB_STATE_RUNNING);
}

TEST_F(PreemptionCycleTest, AGangIsStoppedWholeOnEveryNode) {
  parts_.Register("a", 2);
  parts_.Register("b", 2);
  JobEntry& gang = Running(Spec(2, 2, 0), cycle_);
  Later(absl::Minutes(1));
  JobEntry& high = Offered(Spec(1, 2, 10), cycle_);
  EXPECT_EQ(gang.job().state(), pb::JOB_STATE_PENDING);
  for (const char* name : {"a", "b"}) {
    const NodeEntry& node = *parts_.nodes.Find(name);
    ASSERT_EQ(node.claims.size(), 1u) << name;
    EXPECT_FALSE(node.claims.begin()->second.desired) << name;
  }
  ReportAll();
  cycle_.Run(parts_.now + absl::Seconds(1));
  EXPECT_EQ(high.job().state(), pb::JOB_STATE_SCHEDULED);
}

TEST_F(PreemptionCycleTest, AGangTakesAFreeNodeBesideOneItPreemptsOn) {
  parts_.Register("a", 2);
  parts_.Register("b", 2);
  JobEntry& low = Running(Spec(1, 2, 0), cycle_);
  Later(absl::Minutes(1));
  JobEntry& high = Offered(Spec(2, 2, 10), cycle_);
  EXPECT_EQ(low.job().state(), pb::JOB_STATE_PENDING);
  ReportAll();
  cycle_.Run(parts_.now + absl::Seconds(1));
  ASSERT_EQ(high.job().state(), pb::JOB_STATE_SCHEDULED);
  EXPECT_EQ(high.job().placement_size(), 2);
}

TEST_F(PreemptionCycleTest, TheVictimIsTheJobThatLosesTheLeastWorkSinceItsCheckpoint) {
  parts_.Register("a", 2);
  JobEntry& older = Running(Spec(1, 1, 0), cycle_);
  Later(absl::Minutes(55));
  JobEntry& younger = Running(Spec(1, 1, 0), cycle_);
  Later(absl::Minutes(5));
  // No checkpoints: the younger has run 5 minutes, the older an hour.
  Offered(Spec(1, 1, 10), cycle_);
  EXPECT_EQ(younger.job().state(), pb::JOB_STATE_PENDING);
  EXPECT_EQ(older.job().state(), pb::JOB_STATE_RUNNING);
}

TEST_F(PreemptionCycleTest, ACheckpointingJobLosesLessAndGoesFirst) {
  parts_.Register("a", 2);
  pb::JobSpec checkpointing = Spec(1, 1, 0);
  checkpointing.mutable_checkpoint_interval()->set_seconds(29 * 60);  // its last: 2 minutes ago
  JobEntry& older = Running(checkpointing, cycle_);
  Later(absl::Minutes(55));
  JobEntry& younger = Running(Spec(1, 1, 0), cycle_);
  Later(absl::Minutes(5));
  Offered(Spec(1, 1, 10), cycle_);
  EXPECT_EQ(older.job().state(), pb::JOB_STATE_PENDING);
  EXPECT_EQ(younger.job().state(), pb::JOB_STATE_RUNNING);
  EXPECT_NEAR(older.job().last_preemption().card_hours_lost(), 2.0 / 60, 1e-9);
}

TEST_F(PreemptionCycleTest, AGroupBelowItsShareReclaimsFromOneAboveIt) {
  parts_.Register("a", 4);
  std::vector<JobEntry*> vision;
  for (int i = 0; i < 4; ++i) {
    vision.push_back(&Running(Spec(1, 1, 0, "vision"), reclaiming_cycle_));
    Later(absl::Minutes(1));
  }
  // vision holds the whole pool, twice its share; ml holds nothing.
  JobEntry& ml = Offered(Spec(1, 1, 0, "ml"), reclaiming_cycle_);
  EXPECT_EQ(vision[3]->job().state(), pb::JOB_STATE_PENDING);  // the youngest
  EXPECT_NE(vision[3]->job().last_preemption().reason().find("group vision above its fair share"), std::string::npos)
      << vision[3]->job().last_preemption().reason();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(vision[static_cast<size_t>(i)]->job().state(), pb::JOB_STATE_RUNNING);
  ReportAll();
  reclaiming_cycle_.Run(parts_.now + absl::Seconds(1));
  EXPECT_EQ(ml.job().state(), pb::JOB_STATE_SCHEDULED);
  EXPECT_EQ(vision[3]->job().preemption_count(), 1);
}

TEST_F(PreemptionCycleTest, AGroupAtItsShareReclaimsNothing) {
  parts_.Register("a", 4);
  for (int i = 0; i < 2; ++i) Running(Spec(1, 1, 0, "ml"), reclaiming_cycle_);
  std::vector<JobEntry*> vision;
  for (int i = 0; i < 2; ++i) vision.push_back(&Running(Spec(1, 1, 0, "vision"), reclaiming_cycle_));
  Later(absl::Minutes(1));
  JobEntry& ml = Offered(Spec(1, 1, 0, "ml"), reclaiming_cycle_);
  EXPECT_EQ(ml.job().state(), pb::JOB_STATE_PENDING);
  for (JobEntry* v : vision) EXPECT_EQ(v->job().state(), pb::JOB_STATE_RUNNING);
}

TEST_F(PreemptionCycleTest, WithinAGroupAUserBelowItsPartReclaimsFromAColleagueAboveIt) {
  parts_.Register("a", 4);
  auto of = [](const std::string& group, const std::string& user) {
    pb::JobSpec spec = Spec(1, 1, 0, group);
    spec.set_user(user);
    return spec;
  };
  // ml holds its two cards and vision its two, both alice's: with bob waiting in vision, her
  // part is one of them.
  std::vector<JobEntry*> ml, alice;
  for (int i = 0; i < 2; ++i) ml.push_back(&Running(of("ml", "carol"), reclaiming_cycle_));
  for (int i = 0; i < 2; ++i) {
    alice.push_back(&Running(of("vision", "alice"), reclaiming_cycle_));
    Later(absl::Minutes(1));
  }
  JobEntry& bob = Offered(of("vision", "bob"), reclaiming_cycle_);
  EXPECT_EQ(alice[1]->job().state(), pb::JOB_STATE_PENDING);  // her youngest
  EXPECT_NE(alice[1]->job().last_preemption().reason().find("user alice above its part of group vision"),
            std::string::npos)
      << alice[1]->job().last_preemption().reason();
  EXPECT_EQ(alice[0]->job().state(), pb::JOB_STATE_RUNNING);
  for (JobEntry* j : ml) EXPECT_EQ(j->job().state(), pb::JOB_STATE_RUNNING) << "ml is within its share";
  ReportAll();
  reclaiming_cycle_.Run(parts_.now + absl::Seconds(1));
  EXPECT_EQ(bob.job().state(), pb::JOB_STATE_SCHEDULED);

  // carol joins vision's queue too: three users' parts of two cards are two thirds each, and a
  // whole card would take her above hers, so she reclaims nothing.
  JobEntry& carol = Offered(of("vision", "carol"), reclaiming_cycle_);
  EXPECT_EQ(carol.job().state(), pb::JOB_STATE_PENDING);
  EXPECT_EQ(alice[0]->job().state(), pb::JOB_STATE_RUNNING);
  EXPECT_EQ(bob.job().state(), pb::JOB_STATE_SCHEDULED);
}

// --- Defragmentation: the same stage, moving movable jobs

class DefragCycleTest : public PreemptionCycleTest {
 protected:
  DefragCycleTest()
      : defrag_cycle_(parts_.jobs, parts_.nodes, policy_.get(), parts_.reconciler, parts_.wakeups, Defrag(12)),
        one_move_cycle_(parts_.jobs, parts_.nodes, policy_.get(), parts_.reconciler, parts_.wakeups, Defrag(1)),
        requeue_cycle_(parts_.jobs, parts_.nodes, policy_.get(), parts_.reconciler, parts_.wakeups,
                       Defrag(12, absl::Minutes(30))) {
    parts_.Register("a", 4);
    parts_.Register("b", 4);
  }
  static CycleOptions Defrag(int moves_per_hour, absl::Duration requeue_after = absl::ZeroDuration()) {
    CycleOptions options;
    options.defrag = DefragOptions{absl::Minutes(10), moves_per_hour, absl::Hours(1), requeue_after};
    return options;
  }
  static pb::JobSpec Movable(int cards) {
    pb::JobSpec spec = Spec(1, cards, 0);
    spec.set_movable(true);
    return spec;
  }
  // A running job on `node` (the other nodes drained while it is placed).
  JobEntry& On(const std::string& node, pb::JobSpec spec) {
    for (auto& [name, entry] : parts_.nodes.entries()) parts_.SetDrainedInMemory(entry, name != node);
    JobEntry& job = Running(std::move(spec), defrag_cycle_);
    for (auto& [name, entry] : parts_.nodes.entries()) parts_.SetDrainedInMemory(entry, false);
    EXPECT_EQ(job.job().placement(0).node(), node);
    return job;
  }
  // A gang that has waited past --defrag-after when `cycle` next runs.
  JobEntry& WaitingGang(int cards, SchedulingCycle& cycle) {
    JobEntry& gang = Offered(Spec(1, cards, 0), cycle);
    EXPECT_EQ(gang.job().state(), pb::JOB_STATE_PENDING);
    Later(absl::Minutes(11));
    return gang;
  }

  // Spends one of `cycle`'s moves: on nodes d and e (registered here), d's movable job goes to e
  // for a pair of cards, with `others` drained meanwhile.
  void SpendOneMove(SchedulingCycle& cycle, std::initializer_list<const char*> others) {
    parts_.Register("d", 4);
    parts_.Register("e", 4);
    JobEntry& moved = On("d", Movable(1));
    On("d", Spec(1, 2, 0));
    On("e", Spec(1, 3, 0));
    auto drain = [&](bool drained) {
      for (const char* node : others) parts_.SetDrainedInMemory(node, drained);
    };
    drain(true);
    JobEntry& pair = WaitingGang(2, cycle);
    ASSERT_NO_FATAL_FAILURE(MovedThenPlaced(cycle, moved, pair));
    ReportAll();
    drain(false);
  }
  // A pass of `cycle` moves `moved` for `waiting`; once its processes have exited, the next
  // places `waiting`.
  void MovedThenPlaced(SchedulingCycle& cycle, const JobEntry& moved, const JobEntry& waiting) {
    cycle.Run(parts_.now);
    ASSERT_EQ(moved.job().state(), pb::JOB_STATE_PENDING) << waiting.job().message();
    ReportAll();
    Later(absl::Seconds(1));
    cycle.Run(parts_.now);
    ASSERT_EQ(waiting.job().state(), pb::JOB_STATE_SCHEDULED);
  }

  // a: three young movable jobs and a free card; b: two movable jobs 20 minutes older and two
  // free cards; c (registered here): a job that stays and three free cards. For four cards,
  // freeing a loses the least work but takes three moves, freeing b takes two.
  struct YoungAndOlder {
    std::vector<JobEntry*> young;
    std::vector<JobEntry*> older;
  };
  YoungAndOlder ThreeYoungOnATwoOlderOnB() {
    parts_.Register("c", 4);
    YoungAndOlder jobs;
    for (int i = 0; i < 2; ++i) jobs.older.push_back(&On("b", Movable(1)));
    Later(absl::Minutes(20));
    for (int i = 0; i < 3; ++i) jobs.young.push_back(&On("a", Movable(1)));
    On("c", Spec(1, 1, 0));
    return jobs;
  }

  SchedulingCycle defrag_cycle_;
  SchedulingCycle one_move_cycle_;
  SchedulingCycle requeue_cycle_;  // --defrag-requeue-after 30m
};

TEST_F(DefragCycleTest, AGangWaitingOnScatteredCardsGetsThemByMovingAMovableJob) {
  JobEntry& moved = On("a", Movable(1));
  JobEntry& fixed = On("b", Spec(1, 1, 0));  // 3 + 3 cards free, not 4 on one node
  JobEntry& gang = parts_.Submit(Spec(1, 4, 0));
  defrag_cycle_.Submitted(gang.job().id());
  Later(absl::Minutes(9));
  defrag_cycle_.Run(parts_.now);
  EXPECT_EQ(moved.job().state(), pb::JOB_STATE_RUNNING) << "not before it waited --defrag-after";

  Later(absl::Minutes(2));
  defrag_cycle_.Run(parts_.now);
  EXPECT_EQ(moved.job().state(), pb::JOB_STATE_PENDING);
  EXPECT_EQ(moved.job().reason(), "Moved");
  EXPECT_TRUE(moved.job().last_preemption().defragmentation());
  EXPECT_EQ(moved.job().restart_count(), 0);
  EXPECT_EQ(fixed.job().state(), pb::JOB_STATE_RUNNING) << "not movable";
  EXPECT_EQ(gang.job().pending().preempting(), moved.job().id());
  EXPECT_EQ(gang.job().events(gang.job().events_size() - 1).reason(), "Defragmenting");

  ReportAll();
  Later(absl::Seconds(1));
  defrag_cycle_.Run(parts_.now);
  ASSERT_EQ(gang.job().state(), pb::JOB_STATE_SCHEDULED);
  EXPECT_EQ(gang.job().placement(0).node(), "a");
  // The moved job found room beside the other one, and knows it was stopped.
  ASSERT_EQ(moved.job().state(), pb::JOB_STATE_SCHEDULED);
  EXPECT_EQ(moved.job().placement(0).node(), "b");
  EXPECT_EQ(moved.job().launch_plan(0).env().at("HETPOOL_PREEMPTED"), "1");
}

TEST_F(DefragCycleTest, SharesOnTwoCardsAreRepackedOntoOneToFreeAWholeCard) {
  // Node a only: a half card and a quarter card on two of its cards, the others taken whole.
  parts_.SetDrainedInMemory("b", true);
  JobEntry& fixed = On("a", Spec(1, 2, 0));
  pb::JobSpec half = Movable(1), quarter = Movable(1);
  half.set_device_milli(500);
  quarter.set_device_milli(250);
  pb::JobSpec filler = Spec(1, 1, 0);
  filler.set_device_milli(500);
  JobEntry& halfjob = On("a", half);
  JobEntry& fill = On("a", filler);  // fills the half's card, so the quarter takes a card of its own
  JobEntry& quarterjob = On("a", quarter);
  ASSERT_EQ(fill.job().placement(0).device_ids(0), halfjob.job().placement(0).device_ids(0));
  ASSERT_NE(halfjob.job().placement(0).device_ids(0), quarterjob.job().placement(0).device_ids(0));
  ReportAll({{fill.job().id(), 0}});  // the filler ends: 500 + 750 milli free, no whole card
  ASSERT_EQ(fill.job().state(), pb::JOB_STATE_SUCCEEDED);
  for (auto& [name, node] : parts_.nodes.entries()) parts_.SetDrainedInMemory(node, name != "a");
  JobEntry& whole = WaitingGang(1, defrag_cycle_);
  defrag_cycle_.Run(parts_.now);
  ASSERT_EQ(quarterjob.job().state(), pb::JOB_STATE_PENDING) << whole.job().message();  // the cheaper to move
  EXPECT_EQ(halfjob.job().state(), pb::JOB_STATE_RUNNING);
  EXPECT_EQ(fixed.job().state(), pb::JOB_STATE_RUNNING);
  ReportAll();
  Later(absl::Seconds(1));
  defrag_cycle_.Run(parts_.now);
  ASSERT_EQ(whole.job().state(), pb::JOB_STATE_SCHEDULED);
  ASSERT_EQ(quarterjob.job().state(), pb::JOB_STATE_SCHEDULED);
  EXPECT_EQ(quarterjob.job().placement(0).device_ids(0), halfjob.job().placement(0).device_ids(0));  // repacked
}

TEST_F(DefragCycleTest, NothingMovesWhenThePoolIsFull) {
  JobEntry& movable = On("a", Movable(2));
  On("b", Spec(1, 3, 0));  // 2 + 1 free: a 4-card job waits on capacity, not on scattering
  WaitingGang(4, defrag_cycle_);
  defrag_cycle_.Run(parts_.now);
  EXPECT_EQ(movable.job().state(), pb::JOB_STATE_RUNNING);
}

TEST_F(DefragCycleTest, AMovedJobMustFitElsewhere) {
  // 2 + 1 free for a 3-card job: moving the 2-card job frees a, but then it fits nowhere.
  JobEntry& movable = On("a", Movable(2));
  On("b", Spec(1, 3, 0));
  WaitingGang(3, defrag_cycle_);
  defrag_cycle_.Run(parts_.now);
  EXPECT_EQ(movable.job().state(), pb::JOB_STATE_RUNNING);
}

TEST_F(DefragCycleTest, MovesStayWithinTheHourlyBudget) {
  // 2 + 3 free for a 4-card job: a is freed by moving its two movable jobs to b, two moves.
  JobEntry& first = On("a", Movable(1));
  JobEntry& second = On("a", Movable(1));
  On("b", Spec(1, 1, 0));
  WaitingGang(4, one_move_cycle_);
  one_move_cycle_.Run(parts_.now);
  EXPECT_EQ(first.job().state(), pb::JOB_STATE_RUNNING) << "one move an hour is not enough";
  EXPECT_EQ(second.job().state(), pb::JOB_STATE_RUNNING);
  defrag_cycle_.Run(parts_.now);
  EXPECT_EQ(first.job().state(), pb::JOB_STATE_PENDING);
  EXPECT_EQ(second.job().state(), pb::JOB_STATE_PENDING);
}

TEST_F(DefragCycleTest, ASetOfFewerMovesGoesWhenTheCheapestNeedsMoreThanTheHourAllows) {
  // Two moves an hour. Freeing a takes its three young jobs (the least work lost), freeing b
  // its two older ones: b's are moved (to c), not nothing.
  SchedulingCycle two_moves(parts_.jobs, parts_.nodes, policy_.get(), parts_.reconciler, parts_.wakeups, Defrag(2));
  const YoungAndOlder jobs = ThreeYoungOnATwoOlderOnB();
  JobEntry& gang = WaitingGang(4, two_moves);
  two_moves.Run(parts_.now);
  for (JobEntry* job : jobs.older) EXPECT_EQ(job->job().state(), pb::JOB_STATE_PENDING) << gang.job().message();
  for (JobEntry* job : jobs.young) EXPECT_EQ(job->job().state(), pb::JOB_STATE_RUNNING);
  EXPECT_THAT(gang.job().pending().preempting(), HasSubstr(jobs.older[0]->job().id()));
}

TEST_F(DefragCycleTest, ASetOfFewerMovesGoesWhenTheCheapestNeedsMoreThanTheBucketHolds) {
  // Four moves an hour, at most three at once; one is spent first (d's movable job goes to e for
  // a pair), so two are allowed a few minutes later. Freeing a would take its three young jobs
  // (the least work lost), freeing b its two older ones: b's are moved.
  CycleOptions options = Defrag(4);
  options.defrag.move_burst = 3;
  SchedulingCycle paced(parts_.jobs, parts_.nodes, policy_.get(), parts_.reconciler, parts_.wakeups, options);
  const YoungAndOlder jobs = ThreeYoungOnATwoOlderOnB();
  ASSERT_NO_FATAL_FAILURE(SpendOneMove(paced, {"a", "b", "c"}));
  for (const char* node : {"d", "e"}) parts_.SetDrainedInMemory(node, true);

  JobEntry& gang = WaitingGang(4, paced);  // 11 minutes refill less than one move
  paced.Run(parts_.now);
  for (JobEntry* job : jobs.older) EXPECT_EQ(job->job().state(), pb::JOB_STATE_PENDING) << gang.job().message();
  for (JobEntry* job : jobs.young) EXPECT_EQ(job->job().state(), pb::JOB_STATE_RUNNING);
}

TEST_F(DefragCycleTest, MovesArePacedOverTheHourBeyondTheBurst) {
  // Four moves an hour, at most one at once: a set of two may go when the bucket holds its one,
  // and the next move then waits until the bucket has refilled by two (30 minutes at 4 an hour).
  CycleOptions options = Defrag(4);
  options.defrag.move_burst = 1;
  SchedulingCycle paced(parts_.jobs, parts_.nodes, policy_.get(), parts_.reconciler, parts_.wakeups, options);
  JobEntry& first = On("a", Movable(1));
  JobEntry& second = On("a", Movable(1));
  On("b", Spec(1, 1, 0));  // 2 + 3 free: a is freed by moving its two jobs to b
  JobEntry& gang = WaitingGang(4, paced);
  paced.Run(parts_.now);
  ASSERT_EQ(first.job().state(), pb::JOB_STATE_PENDING) << gang.job().message();
  ASSERT_EQ(second.job().state(), pb::JOB_STATE_PENDING);
  const absl::Time moved_at = parts_.now;
  ReportAll();
  Later(absl::Seconds(1));
  paced.Run(parts_.now);
  ASSERT_EQ(gang.job().state(), pb::JOB_STATE_SCHEDULED);
  ReportAll();

  // A second gang on scattered cards: c's movable job could go to d at once.
  parts_.Register("c", 4);
  parts_.Register("d", 4);
  JobEntry& third = On("c", Movable(1));
  On("d", Spec(1, 1, 0));
  for (const char* node : {"a", "b"}) parts_.SetDrainedInMemory(node, true);
  JobEntry& next = WaitingGang(4, paced);
  paced.Run(parts_.now);
  EXPECT_EQ(third.job().state(), pb::JOB_STATE_RUNNING) << "the bucket is still in debt";
  Later(moved_at + absl::Minutes(29) - parts_.now);
  paced.Run(parts_.now);
  EXPECT_EQ(third.job().state(), pb::JOB_STATE_RUNNING) << "29 minutes refill less than two moves";
  Later(absl::Minutes(2));
  paced.Run(parts_.now);
  EXPECT_EQ(third.job().state(), pb::JOB_STATE_PENDING) << next.job().message();
  EXPECT_EQ(next.job().pending().preempting(), third.job().id());
}

TEST_F(DefragCycleTest, PastRequeueAfterASmallerMovedJobMayWaitForItsNextPlace) {
  // 2 + 1 free for a 3-card job: moving the 2-card job frees a, and then it fits nowhere at once.
  JobEntry& movable = On("a", Movable(2));
  JobEntry& fixed = On("b", Spec(1, 3, 0));
  JobEntry& gang = WaitingGang(3, requeue_cycle_);
  requeue_cycle_.Run(parts_.now);
  EXPECT_EQ(movable.job().state(), pb::JOB_STATE_RUNNING) << "past --defrag-after only: a move must land";

  Later(absl::Minutes(20));  // 31 minutes waited
  requeue_cycle_.Run(parts_.now);
  ASSERT_EQ(movable.job().state(), pb::JOB_STATE_PENDING) << gang.job().message();
  EXPECT_EQ(movable.job().reason(), "Moved");
  EXPECT_THAT(movable.job().last_preemption().reason(), HasSubstr("waits in the queue for its next place"));
  EXPECT_EQ(gang.job().pending().preempting(), movable.job().id());
  ReportAll();
  Later(absl::Seconds(1));
  requeue_cycle_.Run(parts_.now);
  ASSERT_EQ(gang.job().state(), pb::JOB_STATE_SCHEDULED);
  EXPECT_EQ(gang.job().placement(0).node(), "a");
  EXPECT_EQ(movable.job().state(), pb::JOB_STATE_PENDING) << "no room for it yet";
  EXPECT_EQ(movable.job().restart_count(), 0);

  ReportAll({{fixed.job().id(), 0}});  // room comes back: the moved job is placed like any other
  Later(absl::Seconds(1));
  requeue_cycle_.Run(parts_.now);
  ASSERT_EQ(movable.job().state(), pb::JOB_STATE_SCHEDULED);
  EXPECT_EQ(movable.job().placement(0).node(), "b");
  EXPECT_EQ(movable.job().launch_plan(0).env().at("HETPOOL_PREEMPTED"), "1");
}

TEST_F(DefragCycleTest, AJobAsLargeAsTheWaitingOneIsNotMovedToWait) {
  // 1 + 2 free for a 3-card job; the only movable job holds 3 cards itself: moving it would only
  // swap which 3-card job waits.
  JobEntry& movable = On("a", Movable(3));
  On("b", Spec(1, 2, 0));
  JobEntry& gang = WaitingGang(3, requeue_cycle_);
  Later(absl::Minutes(30));
  requeue_cycle_.Run(parts_.now);
  EXPECT_EQ(movable.job().state(), pb::JOB_STATE_RUNNING);
  EXPECT_EQ(gang.job().state(), pb::JOB_STATE_PENDING);
  EXPECT_TRUE(gang.job().pending().preempting().empty());
}

TEST_F(DefragCycleTest, AGangBehindALongQueueOfWaitingJobsStillHasJobsMovedForIt) {
  // 17 jobs of priority 1 wait ahead of the gang in the queue, for A100s that node c's job
  // holds (the head's reservation is c's cards); the gang waits on H100 cards scattered over a
  // and b. Only the first 16 waiting jobs of a pass may preempt: the moves are a stage of their own.
  NodeInventory a100s = testing::H100s(4);
  for (auto& device : a100s.devices) {
    device.model = "A100";
    device.capability.arch_major = 8;
    drivers::ApplyFingerprint(drivers::SpecTable::Defaults(), device);
  }
  parts_.nodes.Register(testing::Registration("c"), std::move(a100s), parts_.now);
  auto a100 = [](pb::JobSpec spec) {
    spec.mutable_requirements()->add_models("A100");
    return spec;
  };
  On("c", a100(Spec(1, 4, 0)));
  JobEntry& movable = On("a", Movable(1));
  On("b", Spec(1, 1, 0));
  std::vector<JobEntry*> ahead;
  for (int i = 0; i < 17; ++i) {
    ahead.push_back(&Offered(a100(Spec(1, 1, 1)), defrag_cycle_));
    ASSERT_EQ(ahead.back()->job().state(), pb::JOB_STATE_PENDING);
  }
  JobEntry& gang = WaitingGang(4, defrag_cycle_);
  defrag_cycle_.Run(parts_.now);
  ASSERT_EQ(movable.job().state(), pb::JOB_STATE_PENDING) << gang.job().message();
  EXPECT_EQ(gang.job().pending().preempting(), movable.job().id());
}

TEST_F(DefragCycleTest, TheHoursMovesAreKeptForTheFirstJobThatNeedsMoreThanAreLeft) {
  // Three moves an hour. a holds three movable jobs of priority 1 and a free card; b, c and f a
  // free card each beside jobs that stay; g a movable job of priority 1 and a free card beside
  // a 2-card job that stays.
  SchedulingCycle three_moves(parts_.jobs, parts_.nodes, policy_.get(), parts_.reconciler, parts_.wakeups, Defrag(3));
  for (const char* node : {"c", "f", "g"}) parts_.Register(node, 4);
  auto priority_1 = [](pb::JobSpec spec) {
    spec.set_priority(1);
    return spec;
  };
  std::vector<JobEntry*> on_a;
  for (int i = 0; i < 3; ++i) on_a.push_back(&On("a", priority_1(Movable(1))));
  for (const char* node : {"b", "c", "f"}) On(node, Spec(1, 3, 0));
  JobEntry& on_g = On("g", priority_1(Movable(1)));
  On("g", Spec(1, 2, 0));
  // First, with only d and e open, a 2-card job spends one move (d's movable job goes to e).
  ASSERT_NO_FATAL_FAILURE(SpendOneMove(three_moves, {"a", "b", "c", "f", "g"}));

  // Within the hour: a 4-card gang needs a's three jobs moved (two moves are left); a 2-card job
  // behind it would need one (g's).
  JobEntry& gang = Offered(priority_1(Spec(1, 4, 0)), three_moves);
  JobEntry& pair_behind = Offered(priority_1(Spec(1, 2, 0)), three_moves);
  Later(absl::Minutes(11));
  three_moves.Run(parts_.now);
  for (const JobEntry* job : on_a) EXPECT_EQ(job->job().state(), pb::JOB_STATE_RUNNING);
  EXPECT_EQ(on_g.job().state(), pb::JOB_STATE_RUNNING) << "the moves left are kept for the gang";
  EXPECT_TRUE(pair_behind.job().pending().preempting().empty());

  Later(absl::Minutes(50));  // the first move is an hour old
  three_moves.Run(parts_.now);
  for (const JobEntry* job : on_a) EXPECT_EQ(job->job().state(), pb::JOB_STATE_PENDING);
  EXPECT_EQ(gang.job().pending().preempting(),
            absl::StrJoin({on_a[0]->job().id(), on_a[1]->job().id(), on_a[2]->job().id()}, ","));
}

// Fair share and defragmentation in one cycle: the place moves bought is not reclaimed at once.
class ReclaimAfterMovesTest : public DefragCycleTest {
 protected:
  ReclaimAfterMovesTest()
      : cycle_with_both_(parts_.jobs, parts_.nodes, policy_.get(), parts_.reconciler, parts_.wakeups, Both()) {}
  CycleOptions Both() {
    CycleOptions options = Defrag(12);
    options.preemption = PreemptionMode::kFairShare;
    options.fair_share = &ledger_;
    return options;
  }
  // a: one of vision's movable jobs; b: three more of vision's. A 4-card gang of vision's waits
  // for 3 + 1 free cards, has the movable job moved to b for it and runs on a: vision holds all
  // 8 cards, twice its share. Returns the gang; `on_b` gets b's four jobs.
  JobEntry& GangPlacedByAMove(std::vector<JobEntry*>& on_b) {
    pb::JobSpec movable = Movable(1);
    movable.set_group("vision");
    JobEntry& moved = On("a", movable);
    for (int i = 0; i < 3; ++i) on_b.push_back(&On("b", Spec(1, 1, 0, "vision")));
    JobEntry& gang = Offered(Spec(1, 4, 0, "vision"), cycle_with_both_);
    Later(absl::Minutes(11));
    EXPECT_NO_FATAL_FAILURE(MovedThenPlaced(cycle_with_both_, moved, gang));
    EXPECT_EQ(moved.job().state(), pb::JOB_STATE_SCHEDULED);
    EXPECT_EQ(moved.job().placement(0).node(), "b");
    on_b.push_back(&moved);
    ReportAll();
    return gang;
  }
  SchedulingCycle cycle_with_both_;  // --preemption fair-share, --defrag-after 10m, --defrag-window 1h
};

TEST_F(ReclaimAfterMovesTest, AJobMovesWereMadeForIsNotReclaimedWithinTheWindow) {
  std::vector<JobEntry*> on_b;
  JobEntry& gang = GangPlacedByAMove(on_b);
  ASSERT_TRUE(gang.job().has_moved_for_at());
  // ml, below its share, asks for a whole node. The gang has run a minute (4 card-minutes lost),
  // b's jobs 1 to 12 minutes each (37): the gang would be the cheapest to stop.
  Later(absl::Minutes(1));
  JobEntry& ml = Offered(Spec(1, 4, 0, "ml"), cycle_with_both_);
  EXPECT_EQ(gang.job().state(), pb::JOB_STATE_RUNNING) << ml.job().message();
  for (const JobEntry* job : on_b) {
    EXPECT_EQ(job->job().state(), pb::JOB_STATE_PENDING);
    EXPECT_NE(job->job().last_preemption().reason().find("group vision above its fair share"), std::string::npos);
  }
  ReportAll();
  cycle_with_both_.Run(parts_.now + absl::Seconds(1));
  ASSERT_EQ(ml.job().state(), pb::JOB_STATE_SCHEDULED);
  EXPECT_EQ(ml.job().placement(0).node(), "b");
}

TEST_F(ReclaimAfterMovesTest, PastTheWindowItIsReclaimedLikeAnyOther) {
  std::vector<JobEntry*> on_b;
  JobEntry& gang = GangPlacedByAMove(on_b);
  Later(absl::Minutes(61));  // the gang has lost 244 card-minutes, b's jobs 280
  JobEntry& ml = Offered(Spec(1, 4, 0, "ml"), cycle_with_both_);
  EXPECT_EQ(gang.job().state(), pb::JOB_STATE_PENDING) << ml.job().message();
  for (const JobEntry* job : on_b) EXPECT_EQ(job->job().state(), pb::JOB_STATE_RUNNING);
}

TEST_F(ReclaimAfterMovesTest, AHigherPriorityStillPreemptsIt) {
  std::vector<JobEntry*> on_b;
  JobEntry& gang = GangPlacedByAMove(on_b);
  Later(absl::Minutes(1));
  JobEntry& urgent = Offered(Spec(1, 4, 10, "ml"), cycle_with_both_);
  EXPECT_EQ(gang.job().state(), pb::JOB_STATE_PENDING) << urgent.job().message();
  EXPECT_EQ(gang.job().last_preemption().by_job(), urgent.job().id());
  for (const JobEntry* job : on_b) EXPECT_EQ(job->job().state(), pb::JOB_STATE_RUNNING);
}

// --- Elastic jobs (issue 16, item 3): placed as large as fits, grown into free cards, shrunk
// for a waiting job before anything is preempted.

class ElasticCycleTest : public PreemptionCycleTest {
 protected:
  ElasticCycleTest()
      : elastic_cycle_(parts_.jobs, parts_.nodes, policy_.get(), parts_.reconciler, parts_.wakeups, Grow()) {
    for (const char* name : {"a", "b", "c"}) parts_.Register(name, 2);
  }
  static CycleOptions Grow() {
    CycleOptions options;
    options.preemption = PreemptionMode::kPriority;
    options.elastic_grow_after = absl::Minutes(5);
    return options;
  }
  static pb::JobSpec Elastic(int min, int max, int priority = 0) {
    pb::JobSpec spec = Spec(min, 2, priority);
    spec.mutable_elastic_nnodes()->set_min(min);
    spec.mutable_elastic_nnodes()->set_max(max);
    spec.mutable_preemption_grace()->set_seconds(20);
    return spec;
  }
  // The job's processes are gone from every node and the cycle runs again.
  void Stopped() {
    ReportAll();
    parts_.wakeups.CapacityChanged();
    elastic_cycle_.Run(parts_.now);
  }

  SchedulingCycle elastic_cycle_;
};

TEST_F(ElasticCycleTest, StartsOnAsManyNodesAsFitWithTorchrunsRange) {
  JobEntry& other = Running(Spec(1, 2, 0), elastic_cycle_);
  JobEntry& elastic = Running(Elastic(1, 3), elastic_cycle_);
  EXPECT_EQ(other.job().placement_size(), 1);
  ASSERT_EQ(elastic.job().placement_size(), 2);  // 3 do not fit, 2 do
  const pb::NodeLaunchPlan& plan = elastic.job().launch_plan(0);
  const std::vector<std::string> argv(plan.argv().begin(), plan.argv().end());
  auto nnodes = std::find(argv.begin(), argv.end(), "--nnodes");
  ASSERT_NE(nnodes, argv.end());
  EXPECT_EQ(*std::next(nnodes), "1:3");
  auto conf = std::find(argv.begin(), argv.end(), "--rdzv_conf");
  ASSERT_NE(conf, argv.end());
  EXPECT_EQ(*std::next(conf), "is_host=1,last_call_timeout=5");
  EXPECT_EQ(plan.env().at("HETPOOL_NNODES_MIN"), "1");
  EXPECT_EQ(plan.env().at("HETPOOL_NNODES_MAX"), "3");
  EXPECT_EQ(plan.env().count("HETPOOL_RESIZED"), 0u);
}

TEST_F(ElasticCycleTest, GrowsIntoFreedCardsOnceItHasRunLongEnough) {
  JobEntry& other = Running(Spec(1, 2, 0), elastic_cycle_);
  JobEntry& elastic = Running(Elastic(1, 3), elastic_cycle_);
  const uint64_t generation = elastic.job().generation();
  ReportAll({{other.job().id(), 0}});  // a node frees up
  ASSERT_EQ(other.job().state(), pb::JOB_STATE_SUCCEEDED);
  elastic_cycle_.Run(parts_.now);
  // Not yet: its generation has just started (each resize restarts it from its checkpoint).
  EXPECT_EQ(elastic.job().state(), pb::JOB_STATE_RUNNING);
  EXPECT_EQ(elastic.job().resize_count(), 0);

  // Once it is due, a pass runs by itself (nothing else changed) and grows it.
  Later(absl::Minutes(5));
  elastic_cycle_.Run(parts_.now);
  ASSERT_EQ(elastic.job().state(), pb::JOB_STATE_PENDING) << elastic.job().message();
  EXPECT_EQ(elastic.job().reason(), "Resized");
  EXPECT_EQ(elastic.job().resize_count(), 1);
  EXPECT_EQ(elastic.job().restart_count(), 0);
  EXPECT_EQ(elastic.job().preemption_count(), 0);
  EXPECT_EQ(elastic.job().last_resize().from_nodes(), 2);
  EXPECT_EQ(elastic.job().last_resize().to_nodes(), 3);
  EXPECT_EQ(elastic.job().last_resize().by_job(), "");
  EXPECT_EQ(elastic.job().last_resize().generation(), generation);
  EXPECT_NEAR(elastic.job().last_resize().card_hours_lost(), 4.0 / 12, 1e-9);  // 4 cards x 5 min
  EXPECT_EQ(parts_.store.StoredJob(elastic.job().id()).reason(), "Resized");
  const pb::Orders orders = parts_.reconciler.OrdersFor(*parts_.nodes.Find(elastic.job().placement(0).node()));
  ASSERT_EQ(orders.kills_size(), 1);
  EXPECT_EQ(orders.kills(0).grace_ms(), 20000);
  EXPECT_EQ(orders.kills(0).reason(), "growing from 2 to 3 nodes");

  // A job submitted while it stops does not take the cards held for it.
  JobEntry& late = Offered(Spec(1, 2, 0), elastic_cycle_);
  EXPECT_EQ(late.job().state(), pb::JOB_STATE_PENDING);
  Stopped();
  ASSERT_EQ(elastic.job().state(), pb::JOB_STATE_SCHEDULED) << elastic.job().message();
  EXPECT_EQ(elastic.job().placement_size(), 3);
  EXPECT_EQ(elastic.job().generation(), generation + 1);
  EXPECT_EQ(elastic.job().launch_plan(0).env().at("HETPOOL_RESIZED"), "1");
  EXPECT_EQ(elastic.job().launch_plan(0).env().count("HETPOOL_PREEMPTED"), 0u);
}

TEST_F(ElasticCycleTest, AJobWhoseNodesAreFinishingIsNotResized) {
  JobEntry& other = Running(Spec(1, 2, 0), elastic_cycle_);
  JobEntry& elastic = Running(Elastic(1, 3), elastic_cycle_);
  ReportAll({{other.job().id(), 0}});
  // One node's ranks are done (its claim goes); the other's still run.
  NodeEntry& done = *parts_.nodes.Find(elastic.job().placement(0).node());
  google::protobuf::RepeatedPtrField<pb::ProcessStatus> reports;
  pb::ProcessStatus& p = *reports.Add();
  p.set_job_id(elastic.job().id());
  p.set_generation(elastic.job().generation());
  p.set_exited(true);
  parts_.reconciler.ApplyProcessReports(done, reports, /*registering=*/false);
  ASSERT_EQ(elastic.job().state(), pb::JOB_STATE_RUNNING);
  Later(absl::Minutes(10));
  parts_.wakeups.CapacityChanged();
  elastic_cycle_.Run(parts_.now);
  EXPECT_EQ(elastic.job().state(), pb::JOB_STATE_RUNNING) << elastic.job().message();
  EXPECT_EQ(elastic.job().resize_count(), 0);
}

TEST_F(ElasticCycleTest, DoesNotGrowWhileAJobWaitsForCards) {
  JobEntry& other = Running(Spec(1, 2, 0), elastic_cycle_);
  JobEntry& elastic = Running(Elastic(1, 3, 5), elastic_cycle_);
  // A lower-priority gang of two nodes waits (it may not shrink a job above its priority).
  JobEntry& gang = Offered(Spec(2, 2, 0), elastic_cycle_);
  ReportAll({{other.job().id(), 0}});
  Later(absl::Minutes(10));
  elastic_cycle_.Run(parts_.now);
  EXPECT_EQ(gang.job().state(), pb::JOB_STATE_PENDING);
  EXPECT_EQ(elastic.job().state(), pb::JOB_STATE_RUNNING);
  EXPECT_EQ(elastic.job().resize_count(), 0);
}

TEST_F(ElasticCycleTest, ShrinksForAWaitingJobBeforePreemptingAnything) {
  JobEntry& low = Running(Spec(1, 2, -5), elastic_cycle_);
  JobEntry& elastic = Running(Elastic(1, 2), elastic_cycle_);
  ASSERT_EQ(elastic.job().placement_size(), 2);
  Later(absl::Minutes(1));
  // Priority 10 could preempt either; the elastic job gives up a node instead.
  JobEntry& waiting = Offered(Spec(1, 2, 10), elastic_cycle_);
  EXPECT_EQ(low.job().state(), pb::JOB_STATE_RUNNING);
  EXPECT_EQ(low.job().preemption_count(), 0);
  ASSERT_EQ(elastic.job().state(), pb::JOB_STATE_PENDING);
  EXPECT_EQ(elastic.job().resize_count(), 1);
  EXPECT_EQ(elastic.job().last_resize().by_job(), waiting.job().id());
  EXPECT_EQ(elastic.job().last_resize().from_nodes(), 2);
  EXPECT_EQ(elastic.job().last_resize().to_nodes(), 1);
  EXPECT_EQ(elastic.job().preemption_count(), 0);
  EXPECT_EQ(waiting.job().pending().preempting(), elastic.job().id());
  EXPECT_EQ(waiting.job().events(waiting.job().events_size() - 1).reason(), "Shrinking");

  Stopped();
  EXPECT_EQ(waiting.job().state(), pb::JOB_STATE_SCHEDULED) << waiting.job().message();
  ASSERT_EQ(elastic.job().state(), pb::JOB_STATE_SCHEDULED) << elastic.job().message();
  EXPECT_EQ(elastic.job().placement_size(), 1);
  EXPECT_EQ(elastic.job().launch_plan(0).env().at("HETPOOL_RESIZED"), "1");
}

TEST_F(ElasticCycleTest, NeverShrinksBelowMinNorForALowerPriority) {
  Running(Spec(1, 2, 0), elastic_cycle_);
  JobEntry& at_min = Running(Elastic(2, 3, 0), elastic_cycle_);
  ASSERT_EQ(at_min.job().placement_size(), 2);
  Later(absl::Minutes(1));
  JobEntry& waiting = Offered(Spec(1, 2, 0), elastic_cycle_);
  EXPECT_EQ(at_min.job().state(), pb::JOB_STATE_RUNNING);
  EXPECT_EQ(waiting.job().state(), pb::JOB_STATE_PENDING);
  EXPECT_EQ(waiting.job().pending().preempting(), "");
}

TEST_F(ElasticCycleTest, AHigherPriorityElasticJobIsNotShrunk) {
  JobEntry& elastic = Running(Elastic(1, 3, 10), elastic_cycle_);
  ASSERT_EQ(elastic.job().placement_size(), 3);
  Later(absl::Minutes(1));
  JobEntry& waiting = Offered(Spec(1, 2, 0), elastic_cycle_);
  EXPECT_EQ(elastic.job().state(), pb::JOB_STATE_RUNNING);
  EXPECT_EQ(elastic.job().resize_count(), 0);
  EXPECT_EQ(waiting.job().state(), pb::JOB_STATE_PENDING);
}

}  // namespace
}  // namespace hetpool::daemon
