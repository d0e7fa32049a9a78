// A real 2-node x 2-process DDP job through hetpoold, two agents and torchrun (gloo on CPU, as the
// sim backend's cards cannot run CUDA): it must train, and cancel must end its processes.
#include <map>
#include <regex>
#include <set>

#include "gtest/gtest.h"
#include "tests/testing/cluster_harness.h"

namespace hetpool::testing {
namespace {

TEST(Training, TwoNodeDdpJobTrainsToSuccess) {
  TestCluster cluster(TestCluster::ExamplePool());
  ASSERT_TRUE(cluster.Start().ok());
  auto submitted = cluster.Submit(cluster.TrainSpec(2, 2, {"--steps", "30"}));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  auto job = cluster.WaitFor(submitted->id(), [](const pb::Job& j) {
    return j.state() >= pb::JOB_STATE_SUCCEEDED;
  }, absl::Seconds(180));
  ASSERT_TRUE(job.ok()) << job.status();
  auto logs = cluster.Logs(job->id());
  ASSERT_TRUE(logs.ok()) << logs.status();
  ASSERT_EQ(job->state(), pb::JOB_STATE_SUCCEEDED) << job->message() << "\n" << *logs;

  // The real plan for the NVIDIA cards, executed with gloo on CPU; the events say so.
  EXPECT_EQ(job->vendor(), "nvidia");
  ASSERT_EQ(job->launch_plan_size(), 2);
  for (const auto& plan : job->launch_plan()) {
    EXPECT_EQ(plan.env().at("CUDA_VISIBLE_DEVICES"), "0,1");
    EXPECT_EQ(plan.env().at("HETPOOL_DIST_BACKEND"), "nccl");
  }
  bool simulated_note = false;
  for (const auto& e : job->events()) simulated_note |= e.message().find("running gloo on CPU") != std::string::npos;
  EXPECT_TRUE(simulated_note);

  // Every rank saw a world of 4.
  std::set<int> ranks;
  std::regex rank_line(R"(rank (\d+): WORLD_SIZE=(\d+) world=(\d+) backend=gloo)");
  for (std::sregex_iterator it(logs->begin(), logs->end(), rank_line), end; it != end; ++it) {
    EXPECT_EQ((*it)[2], "4");
    EXPECT_EQ((*it)[3], "4");
    ranks.insert(std::stoi((*it)[1]));
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2, 3})) << *logs;

  // The loss went down.
  std::smatch final_loss;
  ASSERT_TRUE(std::regex_search(*logs, final_loss, std::regex(R"(final loss ([0-9.]+) \(first ([0-9.]+)\))")))
      << *logs;
  EXPECT_LT(std::stod(final_loss[1]), std::stod(final_loss[2]) / 10);

  // Per-rank logs follow torchrun's real rank assignment.
  for (int rank = 0; rank < 4; ++rank) {
    auto rank_logs = cluster.Logs(job->id(), rank);
    ASSERT_TRUE(rank_logs.ok());
    EXPECT_NE(rank_logs->find("rank " + std::to_string(rank) + ": WORLD_SIZE=4"), std::string::npos) << *rank_logs;
    for (int other = 0; other < 4; ++other) {
      if (other == rank) continue;
      EXPECT_EQ(rank_logs->find("rank " + std::to_string(other) + ": "), std::string::npos) << *rank_logs;
    }
  }
  // Devices are free again.
  pb::ListDevicesResponse devices;
  grpc::ClientContext ctx;
  ASSERT_TRUE(cluster.cluster().ListDevices(&ctx, {}, &devices).ok());
  for (const auto& d : devices.devices()) EXPECT_EQ(d.allocated_to(), "") << d.device().id();
}

TEST(Training, CancelEndsEveryProcessOfTheJob) {
  TestCluster cluster(TestCluster::ExamplePool());
  ASSERT_TRUE(cluster.Start().ok());
  auto submitted = cluster.Submit(cluster.TrainSpec(2, 2, {"--steps", "100000", "--step-sleep", "0.05"}));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  ASSERT_TRUE(cluster.WaitForState(submitted->id(), pb::JOB_STATE_RUNNING, absl::Seconds(60)).ok());
  // Two torchrun agents and four workers.
  ASSERT_GE(cluster.WaitForJobProcesses(submitted->id(), 6, absl::Seconds(60)).size(), 6u);

  pb::CancelJobRequest req;
  req.set_job_id(submitted->id());
  req.set_reason("test cancel");
  pb::Job cancelled;
  grpc::ClientContext ctx;
  ASSERT_TRUE(cluster.jobs().CancelJob(&ctx, req, &cancelled).ok());
  EXPECT_EQ(cancelled.state(), pb::JOB_STATE_CANCELLED);
  for (absl::Time deadline = absl::Now() + absl::Seconds(30);
       !cluster.JobProcesses(submitted->id()).empty() && absl::Now() < deadline;) {
    absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_TRUE(cluster.JobProcesses(submitted->id()).empty());
  // The cards come back once the agents confirm the processes are gone.
  bool all_free = false;
  for (absl::Time deadline = absl::Now() + absl::Seconds(10); !all_free && absl::Now() < deadline;
       absl::SleepFor(absl::Milliseconds(200))) {
    pb::ListDevicesResponse devices;
    grpc::ClientContext list_ctx;
    ASSERT_TRUE(cluster.cluster().ListDevices(&list_ctx, {}, &devices).ok());
    all_free = std::all_of(devices.devices().begin(), devices.devices().end(),
                           [](const pb::DeviceView& d) { return d.allocated_to().empty(); });
  }
  EXPECT_TRUE(all_free);
  auto job = cluster.Get(submitted->id());
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), pb::JOB_STATE_CANCELLED);
  EXPECT_EQ(job->message(), "test cancel");
}

}  // namespace
}  // namespace hetpool::testing
