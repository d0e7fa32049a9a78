// Preemption on a live pool (issue 16, item 2), with real torchrun processes (gloo on CPU): a
// high-priority job stops a checkpointing low-priority one, which saves on SIGTERM within its
// preemption_grace, is requeued without spending a restart, resumes from its checkpoint with
// HETPOOL_PREEMPTED=1 once the cards are free again, and ends with the same weights as a job that
// ran straight through. And an elastic job (issue 16, item 3) that starts on one node while the
// other is busy, grows onto both when it frees up, shrinks back for a waiting job, and ends with
// the weights of a run at a fixed size.
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <regex>

#include "gtest/gtest.h"
#include "tests/testing/cluster_harness.h"

namespace hetpool::testing {
namespace {

constexpr int kSteps = 40;

TEST(Preemption, HetpooldRefusesAnUnknownModeFairShareWithoutQueuesMovesThatWaitFirstAndANegativeBurst) {
  auto [code, out] = RunRefusedDaemon("--preemption always");
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("--preemption: 'always' is not one of off, priority, fair-share"), std::string::npos) << out;
  std::tie(code, out) = RunRefusedDaemon("--preemption fair-share");
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("--preemption fair-share needs --queues"), std::string::npos) << out;
  std::tie(code, out) = RunRefusedDaemon("--defrag-after 10m --defrag-requeue-after 5m");
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("--defrag-requeue-after must be 0 (never) or at least --defrag-after"), std::string::npos) << out;
  std::tie(code, out) = RunRefusedDaemon("--defrag-after 10m --defrag-move-burst -1");
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("--defrag-move-burst not negative"), std::string::npos) << out;
}

std::string Checksum(const std::string& logs) {
  std::smatch m;
  return std::regex_search(logs, m, std::regex(R"(weights checksum (-?[0-9.]+))")) ? m[1].str() : "";
}

TEST(Preemption, AHighPriorityJobStopsACheckpointingOneWhichResumesToTheSameResult) {
  TestCluster::Options options = TestCluster::ExamplePool();
  options.daemon_args = {"--preemption", "priority"};
  TestCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok()) << cluster.DaemonLog();

  // Both nodes' two H100s each: the reference run takes one node (at a priority nobody
  // preempts, slower, so it still runs when the high-priority job comes), the checkpointing job
  // the other.
  auto spec = [&](const std::string& checkpoint, int priority, int steps, const char* step_sleep = "0.25") {
    pb::JobSpec s = cluster.TrainSpec(1, 2, {"--steps", std::to_string(steps), "--step-sleep", step_sleep});
    if (!checkpoint.empty()) {
      for (const char* arg : {"--checkpoint", checkpoint.c_str(), "--checkpoint-every", "5"})
        s.mutable_python()->add_args(arg);
    }
    s.mutable_requirements()->add_vendors("nvidia");
    s.set_priority(priority);
    return s;
  };
  auto reference = cluster.Submit(spec(cluster.dir() + "/reference.pt", 20, kSteps, "0.75"));
  ASSERT_TRUE(reference.ok()) << reference.status();
  pb::JobSpec low_spec = spec(cluster.dir() + "/low.pt", 0, kSteps);
  low_spec.mutable_preemption_grace()->set_seconds(30);
  low_spec.mutable_checkpoint_interval()->set_seconds(1);
  auto low = cluster.Submit(low_spec);
  ASSERT_TRUE(low.ok()) << low.status();
  ASSERT_TRUE(cluster.WaitForState(low->id(), pb::JOB_STATE_RUNNING, absl::Seconds(90)).ok());
  // Wait for its first checkpoint, so the preemption throws away less than it ran.
  ASSERT_TRUE(cluster
                  .WaitFor(
                      low->id(), [&](const pb::Job&) { return std::filesystem::exists(cluster.dir() + "/low.pt"); },
                      absl::Seconds(90))
                  .ok());

  auto high = cluster.Submit(spec("", 10, 4));
  ASSERT_TRUE(high.ok()) << high.status();
  auto high_done = cluster.WaitFor(
      high->id(), [](const pb::Job& j) { return j.state() >= pb::JOB_STATE_SUCCEEDED; }, absl::Seconds(120));
  ASSERT_TRUE(high_done.ok()) << high_done.status();
  EXPECT_EQ(high_done->state(), pb::JOB_STATE_SUCCEEDED) << high_done->message();
  bool preempting_event = false;
  for (const auto& e : high_done->events()) preempting_event |= e.reason() == "Preempting";
  EXPECT_TRUE(preempting_event);

  auto low_done = cluster.WaitFor(
      low->id(), [](const pb::Job& j) { return j.state() >= pb::JOB_STATE_SUCCEEDED; }, absl::Seconds(180));
  ASSERT_TRUE(low_done.ok()) << low_done.status();
  auto low_logs = cluster.Logs(low->id());
  ASSERT_TRUE(low_logs.ok()) << low_logs.status();
  ASSERT_EQ(low_done->state(), pb::JOB_STATE_SUCCEEDED) << low_done->message() << "\n" << *low_logs;
  // Preempted once, by the high-priority job, and requeued without spending a restart.
  EXPECT_EQ(low_done->preemption_count(), 1);
  EXPECT_EQ(low_done->restart_count(), 0);
  EXPECT_EQ(low_done->last_preemption().by_job(), high->id());
  EXPECT_EQ(low_done->last_preemption().reason(), "priority 0 < 10");
  EXPECT_EQ(low_done->generation(), 2u);
  bool preempted_event = false;
  for (const auto& e : low_done->events()) {
    preempted_event |=
        e.reason() == "Preempted" && e.message().find("preempted by job " + high->id()) != std::string::npos;
  }
  EXPECT_TRUE(preempted_event);
  // The agent gave it the job's own grace, not its --kill-grace of 5 s.
  const std::string agent_logs = cluster.AgentLog(0) + cluster.AgentLog(1);
  EXPECT_NE(agent_logs.find("preempted by job " + high->id() + "; SIGKILL after 30s"), std::string::npos) << agent_logs;

  std::string shown;
  EXPECT_EQ(cluster.RunCli({"get", low->id()}, &shown), 0) << shown;
  EXPECT_NE(shown.find("preempted:   1 time(s); last: generation 1 by job " + high->id() + " (priority 0 < 10)"),
            std::string::npos)
      << shown;

  // The second generation knew, resumed from a checkpoint past step 0, and ended where an
  // uninterrupted run ends.
  EXPECT_NE(low_logs->find("preempted=1"), std::string::npos) << *low_logs;
  std::smatch resumed;
  ASSERT_TRUE(std::regex_search(*low_logs, resumed, std::regex(R"(rank 0: resumed from step (\d+))"))) << *low_logs;
  EXPECT_GT(std::stoi(resumed[1]), 0);
  EXPECT_LT(std::stoi(resumed[1]), kSteps);
  auto reference_done = cluster.WaitFor(
      reference->id(), [](const pb::Job& j) { return j.state() >= pb::JOB_STATE_SUCCEEDED; }, absl::Seconds(120));
  ASSERT_TRUE(reference_done.ok()) << reference_done.status();
  auto reference_logs = cluster.Logs(reference->id());
  ASSERT_TRUE(reference_logs.ok());
  EXPECT_EQ(reference_done->preemption_count(), 0);
  const std::string expected = Checksum(*reference_logs);
  ASSERT_FALSE(expected.empty()) << *reference_logs;
  EXPECT_EQ(Checksum(*low_logs), expected) << *low_logs;
}

bool HasEvent(const pb::Job& job, const std::string& reason, const std::string& words) {
  for (const auto& e : job.events()) {
    if (e.reason() == reason && e.message().find(words) != std::string::npos) return true;
  }
  return false;
}

TEST(Elastic, StartsSmallGrowsIntoFreedCardsShrinksForAWaitingJobAndEndsWithTheFixedSizeResult) {
  TestCluster::Options options = TestCluster::ExamplePool();
  options.daemon_args = {"--elastic-grow-after", "1s"};
  TestCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok()) << cluster.DaemonLog();
  constexpr int kElasticSteps = 200;
  // The same global batch of 64 each step whatever the world size: every size ends alike.
  auto spec = [&](int steps, const char* step_sleep, const std::string& checkpoint) {
    std::vector<std::string> args = {"--steps",  std::to_string(steps), "--step-sleep",
                                     step_sleep, "--global-batch",      "64"};
    if (!checkpoint.empty()) args.insert(args.end(), {"--checkpoint", checkpoint, "--checkpoint-every", "5"});
    pb::JobSpec s = cluster.TrainSpec(1, 2, args);
    s.mutable_requirements()->add_vendors("nvidia");
    return s;
  };

  // One node's H100s busy, so the elastic job (one or two nodes) starts on the other alone.
  auto blocker = cluster.Submit(spec(100000, "0.25", ""));
  ASSERT_TRUE(blocker.ok()) << blocker.status();
  ASSERT_TRUE(cluster.WaitForState(blocker->id(), pb::JOB_STATE_RUNNING, absl::Seconds(90)).ok());
  pb::JobSpec elastic_spec = spec(kElasticSteps, "0.05", cluster.dir() + "/elastic.pt");
  elastic_spec.mutable_elastic_nnodes()->set_min(1);
  elastic_spec.mutable_elastic_nnodes()->set_max(2);
  elastic_spec.mutable_preemption_grace()->set_seconds(30);
  elastic_spec.mutable_checkpoint_interval()->set_seconds(1);
  auto elastic = cluster.Submit(elastic_spec);
  ASSERT_TRUE(elastic.ok()) << elastic.status();
  auto started = cluster.WaitForState(elastic->id(), pb::JOB_STATE_RUNNING, absl::Seconds(90));
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_EQ(started->placement_size(), 1);
  ASSERT_TRUE(cluster
                  .WaitFor(
                      elastic->id(),
                      [&](const pb::Job&) { return std::filesystem::exists(cluster.dir() + "/elastic.pt"); },
                      absl::Seconds(90))
                  .ok());

  // The other node frees up: it grows onto both (a new generation, no restart spent).
  std::string out;
  ASSERT_EQ(cluster.RunCli({"cancel", blocker->id()}, &out), 0) << out;
  auto grown = cluster.WaitFor(
      elastic->id(), [](const pb::Job& j) { return j.state() == pb::JOB_STATE_RUNNING && j.placement_size() == 2; },
      absl::Seconds(120));
  ASSERT_TRUE(grown.ok()) << grown.status() << "\n" << cluster.DaemonLog();
  EXPECT_GE(grown->resize_count(), 1);
  EXPECT_TRUE(HasEvent(*grown, "Resized", "growing from 1 to 2 nodes")) << grown->DebugString();

  // A job of its priority waits for one node: the elastic job gives it one instead of making it wait.
  auto waiting = cluster.Submit(spec(kElasticSteps, "0", ""));
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  auto waiting_done = cluster.WaitFor(
      waiting->id(), [](const pb::Job& j) { return j.state() >= pb::JOB_STATE_SUCCEEDED; }, absl::Seconds(180));
  ASSERT_TRUE(waiting_done.ok()) << waiting_done.status();
  ASSERT_EQ(waiting_done->state(), pb::JOB_STATE_SUCCEEDED) << waiting_done->message();
  EXPECT_TRUE(HasEvent(*waiting_done, "Shrinking", "shrinking elastic job " + elastic->id() + " from 2 to 1 nodes"))
      << waiting_done->DebugString();

  auto done = cluster.WaitFor(
      elastic->id(), [](const pb::Job& j) { return j.state() >= pb::JOB_STATE_SUCCEEDED; }, absl::Seconds(240));
  ASSERT_TRUE(done.ok()) << done.status();
  auto logs = cluster.Logs(elastic->id());
  ASSERT_TRUE(logs.ok()) << logs.status();
  ASSERT_EQ(done->state(), pb::JOB_STATE_SUCCEEDED) << done->message() << "\n" << *logs;
  EXPECT_TRUE(HasEvent(*done, "Resized", "shrinking from 2 to 1 nodes for job " + waiting->id()))
      << done->DebugString();
  EXPECT_GE(done->resize_count(), 2);  // it may grow again once the waiting job is done
  EXPECT_EQ(done->restart_count(), 0);
  EXPECT_EQ(done->preemption_count(), 0);
  std::string shown;
  EXPECT_EQ(cluster.RunCli({"get", elastic->id()}, &shown), 0) << shown;
  EXPECT_NE(shown.find("1-2 node(s), elastic"), std::string::npos) << shown;
  EXPECT_NE(shown.find("resized:     " + std::to_string(done->resize_count()) + " time(s)"), std::string::npos)
      << shown;

  // Its last generation knew it was resized, resumed past step 0, and ended where the waiting
  // job (the same steps at one fixed size, straight through) ended, up to float rounding.
  EXPECT_NE(logs->find("resized=1"), std::string::npos) << *logs;
  std::smatch resumed;
  ASSERT_TRUE(std::regex_search(*logs, resumed, std::regex(R"(rank 0: resumed from step (\d+))"))) << *logs;
  EXPECT_GT(std::stoi(resumed[1]), 0);
  auto reference_logs = cluster.Logs(waiting->id());
  ASSERT_TRUE(reference_logs.ok());
  const std::string expected = Checksum(*reference_logs), got = Checksum(*logs);
  ASSERT_FALSE(expected.empty()) << *reference_logs;
  ASSERT_FALSE(got.empty()) << *logs;
  EXPECT_NEAR(std::stod(got), std::stod(expected), 1e-4) << *logs;
}

}  // namespace
}  // namespace hetpool::testing
