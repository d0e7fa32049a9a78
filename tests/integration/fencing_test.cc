// Fencing: a node's job processes never outlive the daemon's belief that they run there.
//  - An agent that no daemon answers for the orphan grace stops its job processes itself.
//  - An agent frozen past its lease has its job processes killed by its fence watchdog at the
//    same deadline, before the daemon restarts the job elsewhere: two generations never overlap.
//  - An agent killed with SIGKILL leaves its jobs running; its successor stops them before it
//    registers, and the daemon restarts them as a new generation.
#include <signal.h>

#include <algorithm>

#include "gtest/gtest.h"
#include "tests/testing/cluster_harness.h"

namespace hetpool::testing {
namespace {

bool AnyAlive(const std::vector<pid_t>& pids) { return std::any_of(pids.begin(), pids.end(), ProcessAlive); }

bool WaitAllGone(const std::vector<pid_t>& pids, absl::Duration timeout) {
  for (absl::Time deadline = absl::Now() + timeout; absl::Now() < deadline; absl::SleepFor(absl::Milliseconds(100))) {
    if (!AnyAlive(pids)) return true;
  }
  return !AnyAlive(pids);
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
      job->id(), [&](const pb::Job& j) { return j.generation() == 2; },
      absl::Seconds(60));
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

TEST(Fencing, RestartedAgentStopsWhatItsPredecessorLeftRunning) {
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

  cluster.SignalAgent(0, SIGKILL);
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_TRUE(AnyAlive(first_generation)) << "the job outlives its agent";
  ASSERT_TRUE(cluster.StartAgent(0).ok());
  EXPECT_TRUE(WaitAllGone(first_generation, absl::Seconds(15))) << cluster.AgentLog(0);
  auto second = cluster.WaitFor(
      job->id(), [](const pb::Job& j) { return j.generation() == 2 && j.state() == pb::JOB_STATE_RUNNING; },
      absl::Seconds(60));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(AnyAlive(first_generation));
  EXPECT_NE(cluster.AgentLog(0).find("left running by a previous agent"), std::string::npos);
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
  bool drained = false;
  for (absl::Time deadline = absl::Now() + absl::Seconds(10); !drained && absl::Now() < deadline;) {
    pb::ListNodesResponse nodes;
    grpc::ClientContext ctx;
    ASSERT_TRUE(cluster.cluster().ListNodes(&ctx, pb::ListNodesRequest(), &nodes).ok());
    drained = nodes.nodes(0).drained();
    if (!drained) absl::SleepFor(absl::Milliseconds(100));
  }
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
