// AgentReconciler (with the placement binder that makes the claims it reconciles): what agents'
// reports and silences do to jobs and claims, thread-free with an injected clock.
#include "src/daemon/state/agent_reconciler.h"

#include "gtest/gtest.h"
#include "src/daemon/launch/placement_binder.h"
#include "tests/testing/state_parts.h"

namespace hetpool::daemon {
namespace {

using testing::StateParts;
using testing::TrainingSpec;

class AgentReconcilerTest : public ::testing::Test {
 protected:
  AgentReconcilerTest()
      : reconciler_(parts_.jobs, parts_.nodes, parts_.wakeups, {absl::Seconds(10), absl::Seconds(20)}) {}

  // Binds the job to node's first `cards` cards (from `first`), as the scheduling cycle would.
  void Bind(JobEntry& entry, const std::vector<std::string>& nodes, int cards, int first = 0) {
    scheduler::Placement placement;
    placement.vendor = Vendor::kNvidia;
    for (const auto& n : nodes) {
      scheduler::NodeAssignment a;
      a.node = n;
      for (int i = first; i < first + cards; ++i) a.device_ids.push_back("nvidia" + std::to_string(i));
      placement.nodes.push_back(a);
    }
    ASSERT_TRUE(BindPlacement(parts_.jobs, parts_.nodes, entry, placement, planner::PriceTable{}).ok());
  }

  // The agent on `node` reports these processes (it applied its newest orders).
  void Report(const std::string& node, std::vector<pb::ProcessStatus> processes) {
    NodeEntry& entry = *parts_.nodes.Find(node);
    entry.applied_version = entry.orders_version;
    google::protobuf::RepeatedPtrField<pb::ProcessStatus> reports(processes.begin(), processes.end());
    reconciler_.ApplyProcessReports(entry, reports, /*registering=*/false);
  }

  static pb::ProcessStatus Process(const JobEntry& entry, bool running, int exit_code = 0) {
    pb::ProcessStatus p;
    p.set_job_id(entry.job().id());
    p.set_generation(entry.job().generation());
    p.set_running(running);
    p.set_exited(!running);
    p.set_exit_code(exit_code);
    return p;
  }

  StateParts parts_{/*max_events=*/8};  // a generation's events, not only its last two
  AgentReconciler reconciler_;
};

TEST_F(AgentReconcilerTest, ANonZeroExitRestartsTheGangUntilRestartsRunOut) {
  parts_.Register("a", 2);
  parts_.Register("b", 2);
  JobEntry& job = parts_.Submit(TrainingSpec(2, 2, /*max_restarts=*/1));
  Bind(job, {"a", "b"}, 2);
  EXPECT_EQ(job.job().state(), pb::JOB_STATE_SCHEDULED);
  EXPECT_EQ(parts_.store.StoredJob(job.job().id()).state(), pb::JOB_STATE_SCHEDULED);
  EXPECT_EQ(reconciler_.OrdersFor(*parts_.nodes.Find("a")).launches_size(), 1);

  Report("a", {Process(job, true)});
  Report("b", {Process(job, true)});
  EXPECT_EQ(job.job().state(), pb::JOB_STATE_RUNNING);

  const pb::ProcessStatus failed = Process(job, false, 3);
  Report("a", {failed});
  EXPECT_EQ(job.job().state(), pb::JOB_STATE_PENDING);
  EXPECT_EQ(job.job().restart_count(), 1);
  EXPECT_TRUE(parts_.wakeups.capacity_changed());
  // b's part of the gang is ordered stopped and holds its cards until b says it is gone.
  const pb::Orders b_orders = reconciler_.OrdersFor(*parts_.nodes.Find("b"));
  ASSERT_EQ(b_orders.kills_size(), 1);
  EXPECT_NE(b_orders.kills(0).reason().find("exited with code 3"), std::string::npos) << b_orders.kills(0).reason();
  EXPECT_EQ(parts_.nodes.Find("b")->claims.size(), 1u);
  Report("b", {});
  EXPECT_TRUE(parts_.nodes.Find("b")->claims.empty());

  Bind(job, {"a", "b"}, 2);
  Report("b", {Process(job, false, 3)});
  // Ended, the job is kept as its bytes, and stopping the rest of its gang did not parse it back.
  EXPECT_TRUE(job.kept_as_bytes());
  EXPECT_EQ(reconciler_.OrdersFor(*parts_.nodes.Find("a")).kills_size(), 1);
  EXPECT_TRUE(job.kept_as_bytes());
  EXPECT_EQ(job.job().state(), pb::JOB_STATE_FAILED);
  EXPECT_EQ(job.job().reason(), "NonZeroExit");
}

// A short job started directly may end before any report saw it run: its first report is its
// exit, and how it started (its note) is still said once.
TEST_F(AgentReconcilerTest, AJobFirstSeenExitedStillSaysHowItStarted) {
  parts_.Register("a", 1);
  JobEntry& job = parts_.Submit(TrainingSpec(1, 1));
  Bind(job, {"a"}, 1);
  pb::ProcessStatus done = Process(job, false);
  done.set_pid(4242);
  done.set_note("adapted: cuda→cpu, nccl→gloo; pre-flight health check passed in 0.1s");
  Report("a", {done});
  ASSERT_EQ(job.job().state(), pb::JOB_STATE_SUCCEEDED);
  std::vector<std::string> started;
  for (const auto& e : job.job().events()) {
    if (e.reason() == "NodeStarted") started.push_back(e.message());
  }
  ASSERT_EQ(started.size(), 1u);
  EXPECT_NE(started[0].find("node a started pid 4242; adapted: cuda→cpu"), std::string::npos) << started[0];
  EXPECT_NE(started[0].find("pre-flight health check passed"), std::string::npos) << started[0];
}

TEST_F(AgentReconcilerTest, TheFailingRankIsRecordedAndAMissingScriptSpendsNoRestart) {
  parts_.Register("a", 1);
  JobEntry& job = parts_.Submit(TrainingSpec(1, 1, /*max_restarts=*/2));
  Bind(job, {"a"}, 1);
  pb::ProcessStatus failed = Process(job, false, 1);  // torchrun's own code
  failed.mutable_rank_failure()->set_global_rank(0);
  failed.mutable_rank_failure()->set_exit_code(3);  // the script's
  failed.mutable_rank_failure()->add_last_lines("ValueError: bad batch size 0");
  Report("a", {failed});
  EXPECT_EQ(job.job().state(), pb::JOB_STATE_PENDING);  // a restart is left
  EXPECT_EQ(job.job().failure().node(), "a");
  EXPECT_EQ(job.job().failure().exit_code(), 3);
  EXPECT_NE(job.job().message().find("rank 0 on a exited with code 3: ValueError: bad batch size 0"), std::string::npos)
      << job.job().message();
  EXPECT_EQ(job.job().failure_origin(), pb::FAILURE_ORIGIN_UNSPECIFIED);  // not FAILED (yet)
  Report("a", {});

  Bind(job, {"a"}, 1);
  pb::ProcessStatus missing = Process(job, false, 127);
  missing.set_message("ScriptNotFound: cannot read script train.py in /work: No such file or directory");
  missing.mutable_rank_failure()->set_launch_failure("ScriptNotFound");
  Report("a", {missing});
  EXPECT_EQ(job.job().state(), pb::JOB_STATE_FAILED);  // at once: another try cannot find it either
  EXPECT_EQ(job.job().restart_count(), 1);
  EXPECT_EQ(job.job().reason(), "ScriptNotFound");
  EXPECT_EQ(job.job().failure_origin(), pb::FAILURE_ORIGIN_JOB);
}

// A report carrying more than an agent keeps is cut, newest lines kept.
TEST_F(AgentReconcilerTest, AnOversizedFailureReportIsCutToTheAgentsBounds) {
  parts_.Register("a", 1);
  JobEntry& job = parts_.Submit(TrainingSpec(1, 1));
  Bind(job, {"a"}, 1);
  pb::ProcessStatus failed = Process(job, false, 1);
  failed.mutable_rank_failure()->set_global_rank(0);
  for (int i = 0; i < 30; ++i)
    failed.mutable_rank_failure()->add_last_lines(std::to_string(i) + std::string(1000, 'x'));
  failed.mutable_rank_failure()->set_signal(std::string(10000, 'S'));
  Report("a", {failed});
  const pb::RankFailure& kept = job.job().failure();
  ASSERT_EQ(kept.last_lines_size(), 10);
  EXPECT_EQ(kept.last_lines(0).substr(0, 3), "20x");
  EXPECT_EQ(kept.last_lines(9).substr(0, 3), "29x");
  for (const auto& line : kept.last_lines()) EXPECT_EQ(line.size(), 300u);
  EXPECT_EQ(kept.signal().size(), 64u);
}

// An agent's words and lines that are not UTF-8, or too long, are made fit to store and send.
TEST_F(AgentReconcilerTest, AReportThatIsNotUtf8IsMadeValidBeforeItIsStored) {
  parts_.Register("a", 1);
  JobEntry& job = parts_.Submit(TrainingSpec(1, 1));
  Bind(job, {"a"}, 1);
  pb::ProcessStatus failed = Process(job, false, 1);
  failed.set_message("exec failed: \xFF" + std::string(5000, 'm'));
  failed.mutable_rank_failure()->set_global_rank(0);
  failed.mutable_rank_failure()->add_last_lines("half a character: \xE6\x8D");
  Report("a", {failed});
  pb::Job parsed;
  ASSERT_TRUE(parsed.ParseFromString(job.job().SerializeAsString())) << "the job must be a valid message";
  EXPECT_EQ(parsed.failure().last_lines(0), "half a character: \xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_LE(parsed.placement(0).exit_message().size(), 1024u);
  EXPECT_EQ(parsed.placement(0).exit_message().substr(0, 16), "exec failed: \xEF\xBF\xBD");
  const auto stored = parts_.store.LoadJobs();
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ((*stored)[0].failure().last_lines(0), parsed.failure().last_lines(0));
}

TEST_F(AgentReconcilerTest, ALostNodeIsTheInfrastructuresFailure) {
  parts_.Register("a", 1);
  JobEntry& job = parts_.Submit(TrainingSpec(1, 1));
  Bind(job, {"a"}, 1);
  reconciler_.ExpireLeases(parts_.now + absl::Seconds(31));
  EXPECT_EQ(job.job().state(), pb::JOB_STATE_FAILED);
  EXPECT_EQ(job.job().reason(), "NodeLost");
  EXPECT_EQ(job.job().failure_origin(), pb::FAILURE_ORIGIN_INFRASTRUCTURE);
}

TEST_F(AgentReconcilerTest, AReportTheStoreRefusesIsAppliedWhenTheAgentSendsItAgain) {
  parts_.Register("a", 1);
  JobEntry& job = parts_.Submit(TrainingSpec(1, 1));
  Bind(job, {"a"}, 1);
  parts_.store.Refuse(true);
  Report("a", {Process(job, false, 0)});
  EXPECT_EQ(job.job().state(), pb::JOB_STATE_SCHEDULED);
  EXPECT_EQ(parts_.nodes.Find("a")->claims.size(), 1u);  // the cards stay held
  parts_.store.Refuse(false);
  Report("a", {Process(job, false, 0)});
  EXPECT_EQ(job.job().state(), pb::JOB_STATE_SUCCEEDED);
  EXPECT_TRUE(parts_.nodes.Find("a")->claims.empty());
}

TEST_F(AgentReconcilerTest, ASilentNodeKeepsItsJobsThroughTheGraceThenLosesThem) {
  parts_.Register("a", 1);
  JobEntry& job = parts_.Submit(TrainingSpec(1, 1, /*max_restarts=*/1));
  Bind(job, {"a"}, 1);
  const absl::Time beat = parts_.now;
  reconciler_.ExpireLeases(beat + absl::Seconds(11));  // past the 10 s lease
  const NodeEntry& node = *parts_.nodes.Find("a");
  EXPECT_FALSE(node.ready);
  EXPECT_TRUE(node.session_id.empty());
  EXPECT_EQ(job.job().state(), pb::JOB_STATE_SCHEDULED);  // within the 20 s grace
  EXPECT_EQ(node.claims.size(), 1u);

  reconciler_.ExpireLeases(beat + absl::Seconds(31));
  EXPECT_EQ(job.job().state(), pb::JOB_STATE_PENDING);
  EXPECT_EQ(job.job().events(job.job().events_size() - 1).reason(), "NodeLost");
  EXPECT_TRUE(node.claims.empty());
}

// The daemon looks at the leases again only when the earliest can lapse (walking every node each
// 100 ms was 7% of an idle 5,000-node daemon's CPU): ExpireLeases says when that is.
TEST_F(AgentReconcilerTest, ExpireLeasesSaysWhenTheEarliestLeaseOrGraceCanLapse) {
  EXPECT_EQ(reconciler_.ExpireLeases(parts_.now), absl::InfiniteFuture());  // no node, nothing to lapse
  const absl::Time a_beat = parts_.now;
  parts_.Register("a", 1);
  JobEntry& job = parts_.Submit(TrainingSpec(1, 1, /*max_restarts=*/1));
  Bind(job, {"a"}, 1);
  parts_.now += absl::Seconds(4);
  const absl::Time b_beat = parts_.now;
  parts_.Register("b", 1);
  // Both within their 10 s leases: a's ends first.
  EXPECT_EQ(reconciler_.ExpireLeases(b_beat), a_beat + absl::Seconds(10));
  // a lapses and keeps its job through the 20 s grace: b's lease now ends first.
  EXPECT_EQ(reconciler_.ExpireLeases(a_beat + absl::Seconds(11)), b_beat + absl::Seconds(10));
  EXPECT_FALSE(parts_.nodes.Find("a")->ready);
  // b lapses with nothing on it (nothing more to happen to it); a's grace is what is left.
  EXPECT_EQ(reconciler_.ExpireLeases(b_beat + absl::Seconds(11)), a_beat + absl::Seconds(30));
  EXPECT_FALSE(parts_.nodes.Find("b")->ready);
  EXPECT_EQ(job.job().state(), pb::JOB_STATE_SCHEDULED);
  // Past a's grace its job goes; no node has anything left to lapse.
  EXPECT_EQ(reconciler_.ExpireLeases(a_beat + absl::Seconds(31)), absl::InfiniteFuture());
  EXPECT_EQ(job.job().state(), pb::JOB_STATE_PENDING);
}

// A lost job whose failure the store refuses keeps its node in the look: it is tried again at the
// next one, not at some lease's end.
TEST_F(AgentReconcilerTest, ALostJobTheStoreRefusesIsLookedAtAgainAtOnce) {
  parts_.Register("a", 1);
  JobEntry& job = parts_.Submit(TrainingSpec(1, 1));
  Bind(job, {"a"}, 1);
  parts_.store.Refuse(true);
  const absl::Time late = parts_.now + absl::Seconds(31);
  EXPECT_EQ(reconciler_.ExpireLeases(late), late);
  EXPECT_EQ(parts_.nodes.Find("a")->claims.size(), 1u);
  parts_.store.Refuse(false);
  EXPECT_EQ(reconciler_.ExpireLeases(late), absl::InfiniteFuture());
  EXPECT_EQ(job.job().state(), pb::JOB_STATE_FAILED);
}

TEST_F(AgentReconcilerTest, AProcessTheDaemonDidNotOrderIsOrderedStoppedAndHoldsItsCards) {
  parts_.Register("a", 2);
  pb::ProcessStatus stray;
  stray.set_job_id("job-999999");
  stray.set_generation(4);
  stray.set_running(true);
  stray.add_device_ids("nvidia1");
  Report("a", {stray});
  const NodeEntry& node = *parts_.nodes.Find("a");
  ASSERT_EQ(node.claims.size(), 1u);
  EXPECT_FALSE(node.claims.begin()->second.desired);
  EXPECT_EQ(node.claims.begin()->second.device_ids, std::vector<std::string>{"nvidia1"});
  const pb::Orders orders = reconciler_.OrdersFor(node);
  ASSERT_EQ(orders.kills_size(), 1);
  EXPECT_EQ(orders.kills(0).job_id(), "job-999999");
}

TEST_F(AgentReconcilerTest, OnlyTheNodesAGenerationRanOnMayPushItsLogs) {
  parts_.Register("a", 1);
  parts_.Register("b", 1);
  JobEntry& job = parts_.Submit(TrainingSpec(1, 1));
  Bind(job, {"a"}, 1);
  EXPECT_TRUE(reconciler_.CheckLogPush(*parts_.nodes.Find("a"), job.job().id(), 1).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(reconciler_.CheckLogPush(*parts_.nodes.Find("b"), job.job().id(), 1)));
  EXPECT_TRUE(absl::IsFailedPrecondition(reconciler_.CheckLogPush(*parts_.nodes.Find("a"), job.job().id(), 2)));
  EXPECT_TRUE(absl::IsFailedPrecondition(reconciler_.CheckLogPush(*parts_.nodes.Find("a"), "job-424242", 1)));
  // A job's last lines may come after its end: the check reads the ended job without parsing
  // it back into the table.
  const std::string id = job.job().id();
  pb::Job cancelled = job.job();
  cancelled.set_state(pb::JOB_STATE_CANCELLED);
  ASSERT_TRUE(parts_.jobs.Commit(job, cancelled).ok());
  reconciler_.ReleaseClaims(job, "job cancelled");
  EXPECT_TRUE(reconciler_.CheckLogPush(*parts_.nodes.Find("a"), id, 1).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(reconciler_.CheckLogPush(*parts_.nodes.Find("b"), id, 1)));
  EXPECT_TRUE(job.kept_as_bytes());
}

// Issue 61: a rank that dies of the card's fault is the infrastructure's failure.
pb::ProcessStatus FailedWith(const JobEntry& entry, const std::string& line) {
  pb::ProcessStatus p;
  p.set_job_id(entry.job().id());
  p.set_generation(entry.job().generation());
  p.set_exited(true);
  p.set_exit_code(1);
  pb::RankFailure* f = p.mutable_rank_failure();
  f->set_global_rank(0);
  f->set_local_rank(0);
  f->set_exit_code(1);
  f->add_last_lines("step 3 loss 0.71");
  f->add_last_lines(line);
  return p;
}

constexpr char kEccLine[] = "RuntimeError: CUDA error: uncorrectable ECC error encountered";

TEST_F(AgentReconcilerTest, AHardwareSignatureRequeuesOffTheCardWithoutSpendingARestart) {
  parts_.Register("a", 4);
  JobEntry& job = parts_.Submit(TrainingSpec(1, 1, /*max_restarts=*/0));
  Bind(job, {"a"}, 1);
  Report("a", {Process(job, true)});
  Report("a", {FailedWith(job, kEccLine)});
  EXPECT_EQ(job.job().state(), pb::JOB_STATE_PENDING) << job.job().message();
  EXPECT_EQ(job.job().reason(), "HardwareFailure");
  EXPECT_EQ(job.job().restart_count(), 0);  // max_restarts 0, and it is not spent
  EXPECT_EQ(job.job().hardware_requeues(), 1);
  EXPECT_EQ(job.job().failure().hardware(), "uncorrectable ECC error");
  EXPECT_EQ(job.job().failure().hardware_evidence(), kEccLine);
  ASSERT_EQ(job.job().avoided_cards_size(), 1);
  EXPECT_EQ(job.job().avoided_cards(0), "a/nvidia0");
  EXPECT_EQ(parts_.store.StoredJob(job.job().id()).avoided_cards_size(), 1);  // stored before it counts
  // One job's failure quarantines nothing (the rule wants two jobs).
  EXPECT_EQ(parts_.nodes.Find("a")->record.quarantined_cards_size(), 0);
}

TEST_F(AgentReconcilerTest, TheSecondJobToFailOnACardQuarantinesItStoredWithTheEvidence) {
  parts_.Register("a", 4);
  for (int i = 0; i < 2; ++i) {
    JobEntry& job = parts_.Submit(TrainingSpec(1, 1, 0));
    Bind(job, {"a"}, 1);
    Report("a", {Process(job, true)});
    Report("a", {FailedWith(job, kEccLine)});
    Report("a", {});  // the process is gone: its claim goes
  }
  const NodeEntry& node = *parts_.nodes.Find("a");
  ASSERT_EQ(node.record.quarantined_cards_size(), 1);
  const pb::CardQuarantine& q = node.record.quarantined_cards(0);
  EXPECT_EQ(q.device_id(), "nvidia0");
  EXPECT_EQ(q.evidence_size(), 2);
  EXPECT_NE(q.evidence(1).find(kEccLine), std::string::npos) << q.evidence(1);
  // Out of service for everything that places: unhealthy, saying why; its neighbours are not.
  EXPECT_FALSE(node.inventory.devices[0].healthy);
  EXPECT_NE(node.inventory.devices[0].health_message.find("quarantined: 2 jobs failed"), std::string::npos);
  EXPECT_TRUE(node.inventory.devices[1].healthy);
  EXPECT_EQ(parts_.store.StoredNode("a").quarantined_cards_size(), 1);
  // Returned by an operator: healthy again, as its agent reported it.
  NodeEntry& mutable_node = *parts_.nodes.Find("a");
  ASSERT_TRUE(parts_.nodes.ReturnCard(mutable_node, "nvidia0").ok());
  EXPECT_TRUE(mutable_node.inventory.devices[0].healthy);
  EXPECT_EQ(parts_.store.StoredNode("a").quarantined_cards_size(), 0);
  EXPECT_TRUE(absl::IsNotFound(parts_.nodes.ReturnCard(mutable_node, "nvidia0")));
}

// torchrun names the failed rank: of a four-card job, only the card that rank ran on is suspect.
TEST_F(AgentReconcilerTest, OnlyTheFailedRanksCardIsSuspected) {
  parts_.Register("a", 4);
  JobEntry& job = parts_.Submit(TrainingSpec(1, 4, 0));
  Bind(job, {"a"}, 4);
  Report("a", {Process(job, true)});
  pb::ProcessStatus failed = FailedWith(job, kEccLine);
  failed.mutable_rank_failure()->set_global_rank(2);
  failed.mutable_rank_failure()->set_local_rank(2);
  Report("a", {failed});
  ASSERT_EQ(job.job().reason(), "HardwareFailure") << job.job().message();
  ASSERT_EQ(job.job().avoided_cards_size(), 1);
  EXPECT_EQ(job.job().avoided_cards(0), "a/" + job.job().placement(0).device_ids(2));
  ASSERT_EQ(job.job().failure().suspect_cards_size(), 1);
}

TEST_F(AgentReconcilerTest, AJobThatBreaksEveryCardItTouchesFailsAsHardwareSuspected) {
  parts_.Register("a", 4);
  JobEntry& job = parts_.Submit(TrainingSpec(1, 1, /*max_restarts=*/5));
  for (int i = 0; i <= HardwareFaultOptions{}.max_hardware_requeues; ++i) {
    Bind(job, {"a"}, 1);
    Report("a", {Process(job, true)});
    Report("a", {FailedWith(job, "torch.distributed.DistBackendError: NCCL error: unhandled system error")});
    Report("a", {});
  }
  EXPECT_EQ(job.job().state(), pb::JOB_STATE_FAILED);
  EXPECT_EQ(job.job().reason(), "HardwareSuspected");
  EXPECT_EQ(job.job().failure_origin(), pb::FAILURE_ORIGIN_INFRASTRUCTURE);
  EXPECT_EQ(job.job().restart_count(), 0);
  // The network's signature points at the node, not at one card: no card is avoided or quarantined.
  EXPECT_EQ(job.job().avoided_cards_size(), 0);
  EXPECT_EQ(parts_.nodes.Find("a")->record.quarantined_cards_size(), 0);
}

TEST_F(AgentReconcilerTest, AnApplicationFaultIsStillTheJobsOwn) {
  parts_.Register("a", 1);
  JobEntry& job = parts_.Submit(TrainingSpec(1, 1, 0));
  Bind(job, {"a"}, 1);
  Report("a", {Process(job, true)});
  Report("a", {FailedWith(job, "RuntimeError: CUDA error: an illegal memory access was encountered")});
  EXPECT_EQ(job.job().state(), pb::JOB_STATE_FAILED);
  EXPECT_EQ(job.job().failure_origin(), pb::FAILURE_ORIGIN_JOB);
  EXPECT_EQ(job.job().hardware_requeues(), 0);
}

TEST_F(AgentReconcilerTest, AFatalSignalQuarantinesItsCardAtOnceAndRequeuesTheJobOnIt) {
  parts_.Register("a", 4);
  JobEntry& job = parts_.Submit(TrainingSpec(1, 1, /*max_restarts=*/0));
  Bind(job, {"a"}, 1);
  Report("a", {Process(job, true)});
  NodeEntry& node = *parts_.nodes.Find("a");
  node.inventory.devices[0].signals.push_back({Severity::kFatal, "Xid 79: GPU has fallen off the bus", "nvml"});
  node.inventory.devices[1].signals.push_back({Severity::kNoted, "Xid 13: graphics engine exception", "nvml"});
  reconciler_.ActOnFatalSignals(node);
  ASSERT_EQ(node.record.quarantined_cards_size(), 1);
  EXPECT_EQ(node.record.quarantined_cards(0).device_id(), "nvidia0");
  EXPECT_EQ(node.record.quarantined_cards(0).reason(),
            "fatal health signal (nvml: Xid 79: GPU has fallen off the bus)");
  EXPECT_EQ(parts_.store.StoredNode("a").quarantined_cards_size(), 1);
  EXPECT_EQ(job.job().state(), pb::JOB_STATE_PENDING);
  EXPECT_EQ(job.job().reason(), "HardwareFailure");
  EXPECT_EQ(job.job().restart_count(), 0);
  EXPECT_EQ(job.job().avoided_cards(0), "a/nvidia0");
  // Its process is ordered stopped; said again, the signal changes nothing more.
  EXPECT_EQ(reconciler_.OrdersFor(node).kills_size(), 1);
  reconciler_.ActOnFatalSignals(node);
  EXPECT_EQ(node.record.quarantined_cards_size(), 1);
  EXPECT_EQ(job.job().hardware_requeues(), 1);
}

// A card that kills jobs in their first seconds with no signature: each job's early failure there
// counts once the job runs past the early window on another card; two such jobs quarantine it.
// A job that fails early everywhere (a typo) suspects nothing.
TEST_F(AgentReconcilerTest, EarlyFailuresCountOnceTheJobRunsElsewhere) {
  parts_.Register("a", 4);
  constexpr char kOdd[] = "RuntimeError: CUDA error: unspecified launch failure";
  for (int i = 0; i < 2; ++i) {
    JobEntry& job = parts_.Submit(TrainingSpec(1, 1, /*max_restarts=*/3));
    Bind(job, {"a"}, 1);  // nvidia0
    Report("a", {Process(job, true)});
    parts_.now += absl::Seconds(5);
    Report("a", {FailedWith(job, kOdd)});
    ASSERT_EQ(job.job().restart_count(), 1) << job.job().message();  // the job's own failure, as before
    Report("a", {});
    EXPECT_EQ(parts_.nodes.Find("a")->record.quarantined_cards_size(), 0);  // nothing proven yet
    Bind(job, {"a"}, 1, /*first=*/1);                                       // nvidia1: runs on
    Report("a", {Process(job, true)});
    parts_.now += absl::Seconds(61);
    Report("a", {Process(job, true)});
  }
  const NodeEntry& node = *parts_.nodes.Find("a");
  ASSERT_EQ(node.record.quarantined_cards_size(), 1);
  EXPECT_EQ(node.record.quarantined_cards(0).device_id(), "nvidia0");
  EXPECT_NE(node.record.quarantined_cards(0).evidence(0).find("exited with code 1 after 5s"), std::string::npos)
      << node.record.quarantined_cards(0).evidence(0);

  // A job that fails early wherever it goes is never vindicated: no card is suspected.
  JobEntry& typo = parts_.Submit(TrainingSpec(1, 1, 3));
  for (int card = 2; card < 4; ++card) {
    Bind(typo, {"a"}, 1, card);
    Report("a", {Process(typo, true)});
    parts_.now += absl::Seconds(2);
    Report("a", {FailedWith(typo, "SyntaxError: invalid syntax")});
    Report("a", {});
  }
  EXPECT_EQ(parts_.nodes.Find("a")->record.quarantined_cards_size(), 1);
}

// Node-wide evidence takes out the node: jobs of two ids failing with NCCL's system error there
// (its own network or system), or three of its cards quarantined. A peer's loss suspects nothing.
TEST_F(AgentReconcilerTest, NodeWideEvidenceQuarantinesTheNode) {
  parts_.Register("a", 4);
  parts_.Register("b", 4);
  constexpr char kPeerLost[] =
      "torch.distributed.DistBackendError: NCCL error: remote process exited or there was "
      "a network error";
  constexpr char kSystem[] = "torch.distributed.DistBackendError: NCCL error: unhandled system error";
  for (const char* line : {kPeerLost, kPeerLost, kSystem, kSystem}) {
    JobEntry& job = parts_.Submit(TrainingSpec(1, 1, 0));
    Bind(job, {"a"}, 1);
    Report("a", {Process(job, true)});
    Report("a", {FailedWith(job, line)});
    EXPECT_EQ(job.job().reason(), "HardwareFailure") << job.job().message();
    Report("a", {});
    if (line == kPeerLost) {
      EXPECT_FALSE(parts_.nodes.Find("a")->record.has_quarantine());
    }
  }
  const NodeEntry& a = *parts_.nodes.Find("a");
  ASSERT_TRUE(a.record.has_quarantine());
  EXPECT_EQ(a.record.quarantine().reason(), "2 jobs failed on it with a node-wide signature (its network) within 1h");
  EXPECT_EQ(a.record.quarantine().evidence_size(), 2);
  EXPECT_FALSE(a.schedulable());
  EXPECT_TRUE(parts_.store.StoredNode("a").has_quarantine());
  EXPECT_EQ(a.record.quarantined_cards_size(), 0);  // no card is more suspect than another
  // Returned by an operator: schedulable again, stored.
  ASSERT_TRUE(parts_.nodes.ReturnNode(*parts_.nodes.Find("a")).ok());
  EXPECT_TRUE(parts_.nodes.Find("a")->schedulable());
  EXPECT_FALSE(parts_.store.StoredNode("a").has_quarantine());

  // Three cards of b raise fatal signals: the node goes too.
  NodeEntry& b = *parts_.nodes.Find("b");
  for (int i = 0; i < 3; ++i) b.inventory.devices[i].signals.push_back({Severity::kFatal, "Xid 79", "nvml"});
  reconciler_.ActOnFatalSignals(b);
  EXPECT_EQ(b.record.quarantined_cards_size(), 3);
  ASSERT_TRUE(b.record.has_quarantine());
  EXPECT_EQ(b.record.quarantine().evidence_size(), 3);
}

// --return-cleared-cards: a card quarantined for a fatal signal returns once its agent reports it
// healthy and clear, while its node passes its health check; a card the jobs' failures
// quarantined waits for an operator.
TEST(ReturnClearedCards, ACardWhoseFatalSignalClearsReturnsByItself) {
  StateParts parts;
  AgentReconciler reconciler(parts.jobs, parts.nodes, parts.wakeups, {absl::Seconds(10), absl::Seconds(20)},
                             {.return_cleared_cards = true});
  parts.Register("a", 2);
  NodeEntry& node = *parts.nodes.Find("a");
  node.inventory.devices[0].signals.push_back({Severity::kFatal, "Xid 79: GPU has fallen off the bus", "nvml"});
  reconciler.ActOnFatalSignals(node);
  ASSERT_EQ(node.record.quarantined_cards_size(), 1);
  *node.record.add_quarantined_cards() = [] {
    pb::CardQuarantine q;
    q.set_device_id("nvidia1");
    q.set_reason("2 jobs failed on it with a hardware signature within 1h");
    return q;
  }();
  // Still reported fatal: it stays out.
  reconciler.ActOnFatalSignals(node);
  EXPECT_EQ(node.record.quarantined_cards_size(), 2);
  // Reset: the agent reports it with no signal; the node's health check fails for now.
  node.inventory.devices[0].signals.clear();
  node.record.set_fault("health check /etc/check failed (exit 1): fan 2 stopped");
  reconciler.ActOnFatalSignals(node);
  EXPECT_EQ(node.record.quarantined_cards_size(), 2);
  node.record.clear_fault();
  reconciler.ActOnFatalSignals(node);
  ASSERT_EQ(node.record.quarantined_cards_size(), 1);
  EXPECT_EQ(node.record.quarantined_cards(0).device_id(), "nvidia1");  // the jobs' evidence stands
  EXPECT_TRUE(node.inventory.devices[0].healthy);
  EXPECT_EQ(parts.store.StoredNode("a").quarantined_cards_size(), 1);
}

// Early failures are common where something fails jobs early on every card alike (a flaky
// filesystem): a card must then stand out from the pool's own rate before it is quarantined.
TEST(CardSuspicion, EarlyFailuresNeedMoreWhereThePoolHasMany) {
  CardSuspicion suspicion({.quarantine_after = 2, .quarantine_window = absl::Hours(1)});
  const absl::Time now = absl::FromUnixSeconds(1000000);
  const std::pair<std::string, std::string> card{"a", "nvidia0"};
  EXPECT_EQ(suspicion.EarlyFailuresNeeded(card, 100, now), 2);  // none yet: the rule's two
  for (int i = 0; i < 50; ++i) {
    const std::string job = absl::StrCat("job-", i);
    suspicion.NoteEarlyFailure(job, {{"b", absl::StrCat("nvidia", i)}}, "failed early", now);
    EXPECT_EQ(suspicion.TakeVindicated(job, {{"c", "nvidia0"}}, now).size(), 1u);
  }
  // About 0.5 a card of the others within the hour: P(5 or more by chance) < 1e-3, not P(4).
  EXPECT_EQ(suspicion.EarlyFailuresNeeded(card, 101, now), 5);
  EXPECT_EQ(suspicion.EarlyFailuresNeeded(card, 101, now + absl::Hours(2)), 2);  // the window moved on
  // Jobs never vindicated are kept only for the window: the daemon does not grow with them.
  suspicion.NoteEarlyFailure("job-x", {card}, "failed early", now);
  suspicion.NoteEarlyFailure("job-y", {card}, "failed early", now + absl::Hours(2));
  EXPECT_EQ(suspicion.JobsWithEarlyFailures(), 1u);
  EXPECT_FALSE(suspicion.HasEarlyFailures("job-x"));
}

TEST(CardSuspicion, CountsDistinctJobsWithinTheWindow) {
  CardSuspicion suspicion({.quarantine_after = 2, .quarantine_window = absl::Hours(1)});
  const absl::Time t0 = absl::FromUnixSeconds(1'000'000);
  const std::pair<std::string, std::string> card{"a", "nvidia0"};
  EXPECT_FALSE(suspicion.NoteFailure(card, "job-1", "e1", t0));
  EXPECT_FALSE(suspicion.NoteFailure(card, "job-1", "e1 again", t0 + absl::Minutes(1)));  // the same job
  EXPECT_FALSE(suspicion.NoteFailure(card, "job-2", "e2", t0 + absl::Minutes(70)));       // the first ones aged out
  auto counted = suspicion.NoteFailure(card, "job-3", "e3", t0 + absl::Minutes(80));
  ASSERT_TRUE(counted.has_value());
  EXPECT_EQ(*counted, (std::vector<std::string>{"e2", "e3"}));
  CardSuspicion never({.quarantine_after = 0});
  EXPECT_FALSE(never.NoteFailure(card, "job-1", "e", t0));
  EXPECT_FALSE(never.NoteFailure(card, "job-2", "e", t0));
}

TEST(HardwareSignatures, EachEntryMatchesItsOwnTextAndApplicationFaultsMatchNone) {
  for (const HardwareSignature& s : HardwareSignatures()) {
    auto found = FindHardwareSignature({std::string("RuntimeError: ") + s.text});
    ASSERT_TRUE(found.has_value()) << s.text;
    EXPECT_STREQ(found->signature->what, s.what);
  }
  for (const char* own : {"RuntimeError: CUDA error: an illegal memory access was encountered",
                          "RuntimeError: CUDA error: device-side assert triggered",
                          "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
                          "ValueError: bad batch size 0"}) {
    EXPECT_FALSE(FindHardwareSignature({own}).has_value()) << own;
  }
}

}  // namespace
}  // namespace hetpool::daemon
