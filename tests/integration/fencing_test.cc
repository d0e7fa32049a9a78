// Fencing: a node's job processes never outlive the daemon's belief that they run there.
//  - An agent that no daemon answers for the orphan grace stops its job processes itself.
//  - An agent frozen past its lease has its job processes killed by its fence watchdog at the
//    same deadline, before the daemon restarts the job elsewhere: two generations never overlap.
//  - An agent killed with SIGKILL leaves its jobs running; its successor stops them before it
//    registers, and the daemon restarts them as a new generation.
#include <signal.h>

#include <algorithm>
#include <filesystem>

#include "gtest/gtest.h"
#include "tests/testing/cluster_harness.h"
#include "tests/testing/small_filesystem.h"
#include "tests/testing/eventually.h"

namespace hetpool::testing {
namespace {

bool AnyAlive(const std::vector<pid_t>& pids) { return std::any_of(pids.begin(), pids.end(), ProcessAlive); }

bool WaitAllGone(const std::vector<pid_t>& pids, absl::Duration timeout) {
  return Eventually([&] { return !AnyAlive(pids); }, timeout);
}

// A one-node training job that runs for a minute, running, with its processes (torchrun and two ranks).
void StartLongJob(TestCluster& cluster, std::string* id, std::vector<pid_t>* pids) {
  auto job = cluster.Submit(cluster.TrainSpec(1, 2, {"--steps", "600", "--step-sleep", "0.1"}));
  ASSERT_TRUE(job.ok()) << job.status();
  *id = job->id();
  ASSERT_TRUE(cluster.WaitForState(job->id(), pb::JOB_STATE_RUNNING, absl::Seconds(60)).ok());
  *pids = cluster.WaitForJobProcesses(job->id(), 3, absl::Seconds(60));
  ASSERT_GE(pids->size(), 3u);
}

TEST(Fencing, AgentCutOffFromEveryDaemonStopsItsJobs) {
  TestCluster::Options options = TestCluster::ExamplePool();
  options.lease_ttl = absl::Seconds(3);
  options.orphan_grace = absl::Seconds(3);  // agents fence after 3 s without an answer
  TestCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok());
  std::string id;
  std::vector<pid_t> pids;
  ASSERT_NO_FATAL_FAILURE(StartLongJob(cluster, &id, &pids));

  cluster.KillDaemon(SIGKILL);  // and it does not come back
  EXPECT_TRUE(WaitAllGone(pids, absl::Seconds(15))) << "the agent kept running a job nobody tracks";
  const std::string logs = cluster.AgentLog(0) + cluster.AgentLog(1);
  EXPECT_NE(logs.find("fenced: no hetpoold answered for"), std::string::npos) << logs;
}

// Issue 14, item 12: a daemon down for longer than the lease (the old fencing point) but shorter
// than the orphan grace kills nothing: the same processes run on, same generation, no restart.
TEST(Fencing, ControlPlaneOutageShorterThanTheGraceKillsNoJob) {
  TestCluster::Options options = TestCluster::ExamplePool();
  options.lease_ttl = absl::Seconds(2);
  options.orphan_grace = absl::Seconds(60);
  TestCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok());
  std::string id;
  std::vector<pid_t> pids;
  ASSERT_NO_FATAL_FAILURE(StartLongJob(cluster, &id, &pids));

  const int port = cluster.port();
  cluster.KillDaemon(SIGKILL);
  absl::SleepFor(absl::Seconds(6));  // the outage itself: three leases, past the old 80%-of-lease fence
  ASSERT_TRUE(std::all_of(pids.begin(), pids.end(), ProcessAlive)) << cluster.AgentLog(0) << cluster.AgentLog(1);
  ASSERT_TRUE(cluster.StartDaemon(port).ok()) << cluster.DaemonLog();
  ASSERT_TRUE(cluster.WaitNodesReady(2, absl::Seconds(30)).ok());
  auto after = cluster.Get(id);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->state(), pb::JOB_STATE_RUNNING);
  EXPECT_EQ(after->generation(), 1u);
  EXPECT_EQ(after->restart_count(), 0);
  EXPECT_TRUE(std::all_of(pids.begin(), pids.end(), ProcessAlive));
}

TEST(Fencing, FrozenAgentsJobsDieBeforeTheirNextGenerationStarts) {
  TestCluster::Options options = TestCluster::ExamplePool();
  options.lease_ttl = absl::Seconds(3);
  options.orphan_grace = absl::Seconds(3);
  TestCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok());
  auto spec = cluster.TrainSpec(1, 2, {"--steps", "600", "--step-sleep", "0.1"});
  spec.mutable_requirements()->add_vendors("nvidia");  // both nodes have two H100
  spec.set_max_restarts(1);
  auto job = cluster.Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  auto running = cluster.WaitForState(job->id(), pb::JOB_STATE_RUNNING, absl::Seconds(60));
  ASSERT_TRUE(running.ok());
  const std::string first_node = running->placement(0).node();
  const size_t agent = first_node == "node-a" ? 0 : 1;
  const auto first_generation = cluster.WaitForJobProcesses(job->id(), 3, absl::Seconds(60));
  ASSERT_GE(first_generation.size(), 3u);

  // Freeze the agent: it can neither answer nor fence. Its watchdog is another process.
  cluster.SignalAgent(agent, SIGSTOP);
  auto moved = cluster.WaitFor(
      job->id(), [&](const pb::Job& j) { return j.generation() == 2; }, absl::Seconds(60));
  // The moment generation 2 is handed out, generation 1 is already gone (the agent still frozen).
  const bool overlap = AnyAlive(first_generation);
  cluster.SignalAgent(agent, SIGCONT);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_FALSE(overlap) << "generation 1 still ran when generation 2 was placed";
  EXPECT_NE(moved->placement(0).node(), first_node);
  EXPECT_EQ(moved->restart_count(), 1);
  EXPECT_NE(cluster.AgentLog(agent).find("hetpool-fence: the agent did not renew"), std::string::npos)
      << cluster.AgentLog(agent);
  ASSERT_TRUE(cluster.WaitForState(job->id(), pb::JOB_STATE_RUNNING, absl::Seconds(60)).ok());
  auto still = cluster.Get(job->id());
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(still->generation(), 2u);
  EXPECT_EQ(still->state(), pb::JOB_STATE_RUNNING);
}

// Kills the agent with SIGKILL while `first_generation` runs, optionally loses its ledger, starts
// it again and expects it to stop those processes before the daemon starts generation 2.
void ExpectSuccessorStopsTheFirstGeneration(TestCluster& cluster, const std::string& id,
                                            const std::vector<pid_t>& first_generation, bool lose_ledger) {
  cluster.SignalAgent(0, SIGKILL);
  ASSERT_TRUE(cluster.WaitAgent(0, absl::Seconds(10)).has_value());
  ASSERT_TRUE(AnyAlive(first_generation)) << "the job outlives its agent";
  if (lose_ledger) std::filesystem::remove(cluster.dir() + "/agent-node-a/process-groups");
  ASSERT_TRUE(cluster.StartAgent(0).ok());
  EXPECT_TRUE(WaitAllGone(first_generation, absl::Seconds(15))) << cluster.AgentLog(0);
  auto second = cluster.WaitFor(
      id, [](const pb::Job& j) { return j.generation() == 2 && j.state() == pb::JOB_STATE_RUNNING; },
      absl::Seconds(60));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(AnyAlive(first_generation));
  EXPECT_NE(cluster.AgentLog(0).find("left running by a previous agent"), std::string::npos);
}

class RestartedAgent : public ::testing::TestWithParam<bool> {};

// With the ledger as the predecessor left it, and without it (issue 45, item 1: a ledger lost or
// behind; the successor finds the job's processes by the agent's mark in their environment).
TEST_P(RestartedAgent, StopsWhatItsPredecessorLeftRunning) {
  TestCluster::Options options = TestCluster::ExamplePool();
  options.agents.resize(1);  // node-a only: the job must come back to the same node
  TestCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok());
  auto spec = cluster.TrainSpec(1, 2, {"--steps", "600", "--step-sleep", "0.1"});
  spec.set_max_restarts(1);
  auto job = cluster.Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE(cluster.WaitForState(job->id(), pb::JOB_STATE_RUNNING, absl::Seconds(60)).ok());
  const auto first_generation = cluster.WaitForJobProcesses(job->id(), 3, absl::Seconds(60));
  ASSERT_GE(first_generation.size(), 3u) << cluster.Get(job->id())->DebugString() << cluster.DaemonLog()
                                         << cluster.AgentLog(0) << cluster.Logs(job->id()).value_or("(no logs)");
  ExpectSuccessorStopsTheFirstGeneration(cluster, job->id(), first_generation, /*lose_ledger=*/GetParam());
}

INSTANTIATE_TEST_SUITE_P(Fencing, RestartedAgent, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& param) {
                           return param.param ? "WithoutItsLedger" : "WithItsLedger";
                         });

// A one-card job on node-a's H100s running `script` under sh, marked as the cluster's.
pb::JobSpec NvidiaShellJob(const TestCluster& cluster, const std::string& script) {
  pb::JobSpec spec = cluster.ShellSpec(script);
  spec.mutable_requirements()->add_vendors("nvidia");
  return spec;
}

bool HasEvent(const pb::Job& job, const std::string& reason) {
  return std::any_of(job.events().begin(), job.events().end(),
                     [&](const pb::JobEvent& e) { return e.reason() == reason; });
}

// Issue 45, item 1: the agent's work dir fills up (a job filling its HOME, which lives there, is
// enough). Before, the ledger was silently replaced by an empty file, and an agent killed then
// and restarted stopped nothing while the daemon started generation 2 beside generation 1. Now
// the launch that cannot be recorded is refused, the node takes no new work until the ledger can
// be written, the output lost meanwhile is said, and the restarted agent stops generation 1.
TEST(Fencing, AFullWorkDirRefusesWhatItCannotRecordAndLosesTrackOfNothing) {
  TestCluster::Options options = TestCluster::ExamplePool();
  options.agents.resize(1);
  TestCluster cluster(options);
  auto disk = SmallFilesystem::Mount(cluster.dir() + "/agent-node-a", 8 << 20);
  if (!disk.ok()) GTEST_SKIP() << "needs a real full filesystem: " << disk.status();
  ASSERT_TRUE(cluster.Start().ok());

  pb::JobSpec ticking = NvidiaShellJob(cluster, "while true; do echo tick; sleep 0.2; done");
  ticking.set_max_restarts(1);
  auto first = cluster.Submit(ticking);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(cluster.WaitForState(first->id(), pb::JOB_STATE_RUNNING, absl::Seconds(60)).ok());
  const auto first_generation = cluster.WaitForJobProcesses(first->id(), 2, absl::Seconds(60));
  ASSERT_GE(first_generation.size(), 2u) << cluster.AgentLog(0);

  ASSERT_TRUE((*disk)->Fill().ok());
  pb::JobSpec refused_spec = NvidiaShellJob(cluster, "exec sleep 600");
  refused_spec.set_max_restarts(0);
  auto refused = cluster.Submit(refused_spec);
  ASSERT_TRUE(refused.ok()) << refused.status();
  auto failed = cluster.WaitForState(refused->id(), pb::JOB_STATE_FAILED, absl::Seconds(60));
  ASSERT_TRUE(failed.ok()) << "a launch the agent could not record ran: " << cluster.Get(refused->id())->DebugString();
  EXPECT_NE(failed->message().find("cannot record the launch"), std::string::npos) << failed->DebugString();
  EXPECT_NE(failed->message().find("No space left on device"), std::string::npos) << failed->DebugString();
  EXPECT_TRUE(cluster.JobProcesses(refused->id()).empty());

  std::string nodes;
  Eventually(
      [&] {
        cluster.RunCli({"nodes"}, &nodes);
        return nodes.find("Faulted") != std::string::npos;
      },
      absl::Seconds(20), absl::Milliseconds(200));
  EXPECT_NE(nodes.find("node-a takes no new work: the agent cannot record job processes"), std::string::npos) << nodes;

  (*disk)->Free();
  auto noted = cluster.WaitFor(
      first->id(), [](const pb::Job& j) { return HasEvent(j, "OutputLost"); }, absl::Seconds(30));
  ASSERT_TRUE(noted.ok()) << noted.status() << cluster.AgentLog(0);
  ASSERT_EQ(noted->placement_size(), 1);
  EXPECT_NE(noted->placement(0).output_lost().find("is lost: the filesystem of"), std::string::npos)
      << noted->DebugString();
  Eventually(
      [&] {
        cluster.RunCli({"nodes"}, &nodes);
        return nodes.find("Faulted") == std::string::npos;
      },
      absl::Seconds(20), absl::Milliseconds(200));
  EXPECT_EQ(nodes.find("Faulted"), std::string::npos)
      << "the node stayed out of service once its disk had room: " << nodes;
  std::string logs;
  Eventually(
      [&] {
        logs = cluster.Logs(first->id()).value_or("");
        return logs.find("hetpool-agent: output written from") != std::string::npos;
      },
      absl::Seconds(20), absl::Milliseconds(200));
  EXPECT_NE(logs.find("hetpool-agent: output written from"), std::string::npos) << logs;

  // The ledger still names generation 1: killed now, the agent's successor stops it.
  ExpectSuccessorStopsTheFirstGeneration(cluster, first->id(), first_generation, /*lose_ledger=*/false);
}

// Graceful stop with --on-stop finish: the node is drained, its running job ends normally, new
// work waits, and the agent exits once the job is accounted for.
TEST(Drain, AgentStoppedWithFinishLetsItsJobEndAndTakesNoNewWork) {
  TestCluster::Options options = TestCluster::ExamplePool();
  options.agents.resize(1);
  options.agents[0].args = {"--on-stop", "finish"};
  TestCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok());
  auto running = cluster.Submit(cluster.TrainSpec(1, 2, {"--steps", "40", "--step-sleep", "0.1"}));
  ASSERT_TRUE(running.ok()) << running.status();
  ASSERT_TRUE(cluster.WaitForState(running->id(), pb::JOB_STATE_RUNNING, absl::Seconds(60)).ok());

  cluster.SignalAgent(0, SIGTERM);
  const bool drained = Eventually(
      [&] {
        pb::ListNodesResponse nodes;
        grpc::ClientContext ctx;
        return cluster.cluster().ListNodes(&ctx, pb::ListNodesRequest(), &nodes).ok() && nodes.nodes(0).drained();
      },
      absl::Seconds(10));
  ASSERT_TRUE(drained) << cluster.AgentLog(0);
  auto waiting = cluster.Submit(cluster.TrainSpec(1, 1, {"--steps", "1"}));
  ASSERT_TRUE(waiting.ok());

  auto done = cluster.WaitForState(running->id(), pb::JOB_STATE_SUCCEEDED, absl::Seconds(60));
  ASSERT_TRUE(done.ok()) << done.status() << cluster.AgentLog(0);
  EXPECT_EQ(done->generation(), 1u);  // ran to its end, not stopped and restarted
  EXPECT_EQ(cluster.WaitAgent(0, absl::Seconds(30)), std::optional<int>(0)) << cluster.AgentLog(0);
  auto still = cluster.Get(waiting->id());
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(still->state(), pb::JOB_STATE_PENDING);
}

}  // namespace
}  // namespace hetpool::testing
