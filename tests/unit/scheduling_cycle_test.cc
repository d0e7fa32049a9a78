// SchedulingCycle: passes over the queue through the daemon's default policy, thread-free over
// the in-memory parts: what a pass offers, what it binds, and how it records why a job waits.
#include "src/daemon/state/scheduling_cycle.h"

#include "gtest/gtest.h"
#include "absl/strings/str_format.h"
#include "scheduler/framework/profile.h"
#include "src/daemon/state/pool_queries.h"
#include "tests/testing/state_parts.h"

namespace hetpool::daemon {
namespace {

using testing::CountingObserver;
using testing::StateParts;
using testing::TrainingSpec;

class SchedulingCycleTest : public ::testing::Test {
 protected:
  SchedulingCycleTest()
      : cycle_(parts_.jobs, parts_.nodes, policy_.get(), parts_.reconciler, parts_.wakeups, Options()) {}
  CycleOptions Options() {
    CycleOptions options;
    options.observer = &counter_;
    options.full_pass_every = absl::Minutes(1);
    return options;
  }
  JobEntry& Submit(pb::JobSpec spec) {
    JobEntry& entry = parts_.Submit(std::move(spec));
    cycle_.Submitted(entry.job().id());
    return entry;
  }

  StateParts parts_;
  CountingObserver counter_;
  std::unique_ptr<scheduler::Framework> policy_ = scheduler::DefaultFramework();
  SchedulingCycle cycle_;
};

TEST_F(SchedulingCycleTest, APlacementIsBoundStoredAndClaimed) {
  parts_.Register("a", 4);
  JobEntry& job = Submit(TrainingSpec(1, 2));
  cycle_.Run(parts_.now);
  ASSERT_EQ(job.job().state(), pb::JOB_STATE_SCHEDULED) << job.job().message();
  EXPECT_EQ(parts_.store.StoredJob(job.job().id()).state(), pb::JOB_STATE_SCHEDULED);
  const NodeEntry& node = *parts_.nodes.Find("a");
  ASSERT_EQ(node.claims.size(), 1u);
  EXPECT_EQ(node.claims.begin()->second.device_ids.size(), 2u);
  EXPECT_FALSE(job.job().has_pending());
  // The views the next decision sees count the claim.
  int free = 0;
  for (const auto& view : cycle_.NodeViews(false)) {
    for (const auto& dv : view.devices) free += dv.free;
  }
  EXPECT_EQ(free, 2);
}

// Issue 19: a restarted daemon keeps its finished jobs as their stored bytes; a full pass, the
// metrics' snapshot and the groups' holdings read only their summaries, so none is parsed.
TEST_F(SchedulingCycleTest, FullPassesAndSnapshotsLeaveFinishedJobsAsBytes) {
  parts_.Register("a", 4);
  std::vector<pb::Job> history;
  for (int i = 1; i <= 20; ++i) {
    pb::Job job;
    job.set_id(absl::StrFormat("job-%06d", i));
    job.set_submit_seq(static_cast<uint64_t>(i));
    job.set_state(i % 2 == 0 ? pb::JOB_STATE_SUCCEEDED : pb::JOB_STATE_FAILED);
    *job.mutable_spec() = TrainingSpec(1, 1);
    job.mutable_spec()->set_priority(i % 3);
    history.push_back(std::move(job));
  }
  parts_.Load(history, 20);
  JobEntry& waiting = Submit(TrainingSpec(1, 2));
  cycle_.Run(parts_.now);
  ASSERT_EQ(waiting.job().state(), pb::JOB_STATE_SCHEDULED);
  parts_.wakeups.CapacityChanged();
  cycle_.Run(parts_.now + absl::Minutes(2));  // past full_pass_every: a full pass
  const PoolSnapshot snapshot = SnapshotOf(parts_.nodes, parts_.jobs, parts_.now);
  EXPECT_EQ((snapshot.jobs.at({pb::JOB_STATE_SUCCEEDED, 1})), 3);  // 4, 10, 16
  HoldingsByGroup(parts_.nodes, parts_.jobs);
  size_t kept_as_bytes = 0;
  for (const auto& [id, entry] : parts_.jobs.entries()) kept_as_bytes += entry.kept_as_bytes() ? 1 : 0;
  EXPECT_EQ(kept_as_bytes, 20u);
}

// Issue 19: views of unchanged nodes are reused (same content, same generation) and rebuilt as
// soon as what they show changes: claims, schedulability, a new inventory.
TEST_F(SchedulingCycleTest, ViewsOfUnchangedNodesAreReusedAndChangedOnesRebuilt) {
  parts_.Register("a", 4);
  parts_.Register("b", 4);
  auto free_on = [&](const std::vector<scheduler::NodeView>& views, const std::string& node) {
    int free = 0;
    for (const auto& view : views) {
      if (view.name != node) continue;
      for (const auto& dv : view.devices) free += dv.free;
    }
    return free;
  };
  const auto before = cycle_.NodeViews(false);
  const auto again = cycle_.NodeViews(false);
  ASSERT_EQ(before.size(), 2u);
  EXPECT_EQ(before[0].generation, again[0].generation);
  EXPECT_EQ(before[1].generation, again[1].generation);

  JobEntry& job = Submit(TrainingSpec(1, 2));
  cycle_.Run(parts_.now);
  ASSERT_EQ(job.job().state(), pb::JOB_STATE_SCHEDULED) << job.job().message();
  const std::string used = job.job().placement(0).node();
  const auto placed = cycle_.NodeViews(false);
  EXPECT_EQ(free_on(placed, used), 2) << "the claim shows";
  EXPECT_EQ(free_on(placed, used == "a" ? "b" : "a"), 4);
  EXPECT_EQ(free_on(cycle_.NodeViews(true), used), 4) << "as if nothing were held";

  parts_.nodes.EndSession(*parts_.nodes.Find(used));  // a lapsed lease
  for (const auto& view : cycle_.NodeViews(false)) {
    if (view.name == used) {
      EXPECT_FALSE(view.schedulable);
    }
  }
  parts_.Register(used, 8);  // registers again with more cards: a new inventory
  EXPECT_EQ(free_on(cycle_.NodeViews(true), used), 8);
}

// Issue 44: a pass brings its views up to date through pointers to every node, kept while no
// node is added. A node registered between passes (here one that sorts first, so every other
// node's place moves) is seen by the next pass, and so is a change on a node already known.
TEST_F(SchedulingCycleTest, APassSeesNodesAddedSinceTheLastAndChangesOnKnownOnes) {
  parts_.Register("b", 2);
  JobEntry& first = Submit(TrainingSpec(1, 2));
  cycle_.Run(parts_.now);
  ASSERT_EQ(first.job().state(), pb::JOB_STATE_SCHEDULED) << first.job().message();

  parts_.Register("a", 2);
  JobEntry& second = Submit(TrainingSpec(1, 2));
  cycle_.Run(parts_.now + absl::Seconds(1));
  ASSERT_EQ(second.job().state(), pb::JOB_STATE_SCHEDULED) << second.job().message();
  EXPECT_EQ(second.job().placement(0).node(), "a");

  parts_.Register("c", 2);
  parts_.nodes.EndSession(*parts_.nodes.Find("c"));  // a lapsed lease: takes no work
  JobEntry& third = Submit(TrainingSpec(1, 2));
  cycle_.Run(parts_.now + absl::Seconds(2));
  EXPECT_EQ(third.job().state(), pb::JOB_STATE_PENDING);
  parts_.Register("c", 2);  // its agent is back
  parts_.wakeups.CapacityChanged();
  cycle_.Run(parts_.now + absl::Seconds(3));
  ASSERT_EQ(third.job().state(), pb::JOB_STATE_SCHEDULED) << third.job().message();
  EXPECT_EQ(third.job().placement(0).node(), "c");
}

TEST_F(SchedulingCycleTest, WithoutFreedCapacityOnlyNewSubmissionsAreOffered) {
  parts_.Register("a", 2);
  Submit(TrainingSpec(1, 2));
  Submit(TrainingSpec(1, 2));  // waits: the first takes both cards
  Submit(TrainingSpec(1, 2));
  cycle_.Run(parts_.now);  // the first pass takes the whole queue
  EXPECT_EQ(counter_.decisions, 3);
  EXPECT_FALSE(parts_.wakeups.capacity_changed());

  cycle_.Run(parts_.now + absl::Seconds(1));  // nothing new, nothing freed: nobody is offered
  EXPECT_EQ(counter_.decisions, 3);
  Submit(TrainingSpec(1, 1));
  cycle_.Run(parts_.now + absl::Seconds(2));
  EXPECT_EQ(counter_.decisions, 4);

  parts_.wakeups.CapacityChanged();  // e.g. a job ended
  cycle_.Run(parts_.now + absl::Seconds(3));
  EXPECT_EQ(counter_.decisions, 7);
  cycle_.Run(parts_.now + absl::Minutes(2));  // the once-a-minute safety net
  EXPECT_EQ(counter_.decisions, 10);
}

TEST_F(SchedulingCycleTest, TheHeadOfTheQueueHoldsNodesAndItsReasonIsRecordedOnce) {
  parts_.Register("a", 4);
  parts_.Register("b", 4);
  JobEntry& running = Submit(TrainingSpec(1, 3));
  cycle_.Run(parts_.now);
  ASSERT_EQ(running.job().state(), pb::JOB_STATE_SCHEDULED);
  JobEntry& big = Submit(TrainingSpec(2, 4));  // needs both nodes whole
  JobEntry& small = Submit(TrainingSpec(1, 1));
  parts_.wakeups.CapacityChanged();
  cycle_.Run(parts_.now + absl::Seconds(1));
  ASSERT_EQ(big.job().state(), pb::JOB_STATE_PENDING);
  EXPECT_EQ(big.job().reason(), "Unschedulable");
  EXPECT_EQ(big.job().pending().held_for_it(), "a,b");
  // Both nodes' cards are held for the head: the small job behind it may not take them.
  EXPECT_EQ(small.job().state(), pb::JOB_STATE_PENDING);
  const uint64_t version = big.version;
  const int events = big.job().events_size();
  parts_.wakeups.CapacityChanged();
  cycle_.Run(parts_.now + absl::Seconds(2));
  EXPECT_EQ(big.version, version);  // the same reason again is not news
  EXPECT_EQ(big.job().events_size(), events);
  EXPECT_EQ(parts_.store.StoredJob(big.job().id()).reason(), "");  // why a job waits is not stored
}

// The head of the queue is held the node closest to holding all it asks, host CPU included: not
// a node whose cores could never hold it (its cards would be kept from others for nothing), nor
// one with more cards free whose cores a CPU-heavy job takes.
TEST_F(SchedulingCycleTest, TheHeadIsHeldTheNodeClosestToItsWholeAskHostCpuIncluded) {
  auto with_cores = [](int cores) {
    NodeInventory inventory = testing::H100s(4);
    inventory.cpus = cores;
    return inventory;
  };
  auto job_asking = [](int cards, int64_t cpu_milli) {
    pb::JobSpec spec = TrainingSpec(1, cards);
    spec.mutable_host()->set_cpu_milli_per_node(cpu_milli);
    return spec;
  };
  // The nodes come one at a time, each job landing on the only node there is.
  parts_.nodes.Register(testing::Registration("b"), with_cores(32), parts_.now);  // 4 cards, 32 cores
  JobEntry& on_b = Submit(job_asking(2, 6000));                                   // b: 2 cards and 26 cores left
  cycle_.Run(parts_.now);
  parts_.nodes.Register(testing::Registration("c"), with_cores(32), parts_.now);  // 4 cards, 32 cores
  JobEntry& on_c = Submit(job_asking(1, 28000));                                  // c: 3 cards but 4 cores left
  cycle_.Run(parts_.now);
  parts_.nodes.Register(testing::Registration("a"), with_cores(16), parts_.now);  // 4 cards, 16 cores
  ASSERT_EQ(on_b.job().state(), pb::JOB_STATE_SCHEDULED);
  ASSERT_EQ(on_c.job().state(), pb::JOB_STATE_SCHEDULED);
  ASSERT_EQ(on_b.job().placement(0).node(), "b");
  ASSERT_EQ(on_c.job().placement(0).node(), "c");
  // 4 cards and 24 cores: never on a (16 cores in all, though its 4 cards are free); on c only
  // once 20 more cores free there; b is half-way on cards and has the cores.
  JobEntry& head = Submit(job_asking(4, 24000));
  parts_.wakeups.CapacityChanged();
  cycle_.Run(parts_.now + absl::Seconds(1));
  ASSERT_EQ(head.job().state(), pb::JOB_STATE_PENDING);
  EXPECT_EQ(head.job().pending().held_for_it(), "b") << head.job().message();
}

TEST_F(SchedulingCycleTest, AJobNoNodeCouldEverHoldIsUnresolvable) {
  parts_.Register("a", 2);
  JobEntry& job = Submit(TrainingSpec(1, 8));
  cycle_.Run(parts_.now);
  EXPECT_EQ(job.job().state(), pb::JOB_STATE_PENDING);
  EXPECT_EQ(job.job().reason(), "Unresolvable");
  EXPECT_TRUE(job.job().pending().never_fits());
}

}  // namespace
}  // namespace hetpool::daemon
