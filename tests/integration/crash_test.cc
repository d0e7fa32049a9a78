// kill -9 of hetpoold: every acknowledged submission survives, and running jobs are re-adopted
// (same generation, same processes), not restarted. On both stores: SQLite and a real etcd.
#include <signal.h>

#include <algorithm>

#include "gtest/gtest.h"
#include "tests/testing/cluster_harness.h"
#include "tests/testing/etcd_process.h"

namespace hetpool::testing {
namespace {

class Crash : public ::testing::TestWithParam<std::string> {};

TEST_P(Crash, KillNineLosesNoAcknowledgedJobAndReadoptsRunningOnes) {
  TempDir etcd_dir;
  EtcdProcess etcd(etcd_dir.path());
  TestCluster::Options options = TestCluster::ExamplePool();
  if (GetParam() == "etcd") {
    ASSERT_TRUE(etcd.Start().ok()) << etcd.Log();
    options.daemon_args = {"--store", "etcd://" + etcd.endpoint()};
  }
  TestCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok());
  // A job that runs for a while on both nodes' NVIDIA cards.
  auto running = cluster.Submit(cluster.TrainSpec(2, 2, {"--steps", "150", "--step-sleep", "0.1"}));
  ASSERT_TRUE(running.ok()) << running.status();
  ASSERT_TRUE(cluster.WaitForState(running->id(), pb::JOB_STATE_RUNNING, absl::Seconds(60)).ok());
  auto pids_before = cluster.WaitForJobProcesses(running->id(), 6, absl::Seconds(60));
  ASSERT_GE(pids_before.size(), 6u);

  // N acknowledged submissions that must wait (the NVIDIA cards are busy).
  constexpr int kSubmissions = 25;
  std::vector<std::string> acknowledged;
  for (int i = 0; i < kSubmissions; ++i) {
    auto spec = cluster.TrainSpec(2, 2, {"--steps", "1"});
    spec.mutable_requirements()->add_vendors("nvidia");
    spec.set_name("queued-" + std::to_string(i));
    auto job = cluster.Submit(spec);
    ASSERT_TRUE(job.ok()) << job.status();
    acknowledged.push_back(job->id());
  }

  cluster.KillDaemon(SIGKILL);
  ASSERT_TRUE(cluster.StartDaemon(cluster.port()).ok());

  // All N are there, in order, still pending.
  pb::ListJobsRequest list_req;
  list_req.add_states(pb::JOB_STATE_PENDING);
  pb::ListJobsResponse list;
  grpc::ClientContext ctx;
  ASSERT_TRUE(cluster.jobs().ListJobs(&ctx, list_req, &list).ok());
  std::vector<std::string> pending;
  for (const auto& j : list.jobs()) pending.push_back(j.id());
  EXPECT_EQ(pending, acknowledged);

  // The agents re-register and the running job is adopted: same generation, same processes.
  ASSERT_TRUE(cluster.WaitNodesReady(2, absl::Seconds(30)).ok());
  auto adopted = cluster.Get(running->id());
  ASSERT_TRUE(adopted.ok());
  EXPECT_EQ(adopted->state(), pb::JOB_STATE_RUNNING);
  EXPECT_EQ(adopted->generation(), 1u);
  EXPECT_EQ(adopted->restart_count(), 0);
  auto pids_after = cluster.JobProcesses(running->id());
  std::sort(pids_before.begin(), pids_before.end());
  std::sort(pids_after.begin(), pids_after.end());
  EXPECT_EQ(pids_after, pids_before);

  auto done = cluster.WaitFor(running->id(), [](const pb::Job& j) { return j.state() >= pb::JOB_STATE_SUCCEEDED; },
                              absl::Seconds(120));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->state(), pb::JOB_STATE_SUCCEEDED) << done->message();
  EXPECT_EQ(done->generation(), 1u);
  auto logs = cluster.Logs(running->id());
  ASSERT_TRUE(logs.ok());
  EXPECT_NE(logs->find("final loss"), std::string::npos);
  // Rank 0 started exactly once: nothing was relaunched.
  size_t starts = 0;
  for (size_t pos = 0; (pos = logs->find("rank 0: WORLD_SIZE=4", pos)) != std::string::npos; ++pos) ++starts;
  EXPECT_EQ(starts, 1u);

  // The queue then drains through the cards the adopted job freed.
  auto first_queued = cluster.WaitForState(acknowledged.front(), pb::JOB_STATE_SUCCEEDED, absl::Seconds(120));
  EXPECT_TRUE(first_queued.ok()) << first_queued.status();
}

INSTANTIATE_TEST_SUITE_P(Stores, Crash, ::testing::Values("sqlite", "etcd"),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace hetpool::testing
