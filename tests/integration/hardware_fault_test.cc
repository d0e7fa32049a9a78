// Hardware faults (issue 61): a card that fails every job placed on it is no black hole. Its
// failures are read as the hardware's, each failed job resumes on another card without spending
// a restart, and the card is quarantined after the rule's two failures, with the evidence.
#include <fstream>
#include <set>

#include "gtest/gtest.h"
#include "tests/testing/cluster_harness.h"
#include "tests/testing/temp_dir.h"

namespace hetpool::testing {
namespace {

TEST(HardwareFaults, ABadCardTakesAtMostTwoFailuresAndEveryJobSucceeds) {
  TestCluster::Options options;
  // One node of four NVIDIA cards: each run of the script reads its card from CUDA_VISIBLE_DEVICES.
  TempDir dir;
  const std::string inventory = dir.path() + "/node-a.json";
  const std::string h100 = R"({"vendor": "nvidia", "model": "H100-SXM", "memory_mib": 81559, "architecture": "sm_90"})";
  std::ofstream(inventory) << R"({"hostname": "sim-node-a", "cpus": 64, "memory_mib": 524288, "devices": [)" << h100
                           << "," << h100 << "," << h100 << "," << h100 << "]}";
  options.agents.push_back({.name = "node-a", .inventory_file = inventory});
  TestCluster cluster(options);
  ASSERT_TRUE(cluster.Start().ok());
  ASSERT_TRUE(cluster.WaitNodesReady(1, absl::Seconds(60)).ok());
  // Two of the four cards held by a long job, as in the issue's pool.
  auto long_job = cluster.Submit(cluster.TrainSpec(1, 2, {"--steps", "100000", "--step-sleep", "0.1"}));
  ASSERT_TRUE(long_job.ok()) << long_job.status();
  ASSERT_TRUE(cluster.WaitForState(long_job->id(), pb::JOB_STATE_RUNNING, absl::Seconds(120)).ok());

  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i) {
    pb::JobSpec spec = cluster.TrainSpec(1, 1, {});
    spec.mutable_python()->set_script("tests/integration/scripts/card_with_ecc_errors.py");
    spec.set_max_restarts(0);
    auto job = cluster.Submit(spec);
    ASSERT_TRUE(job.ok()) << job.status();
    ids.push_back(job->id());
  }
  int hardware_failures = 0;
  std::set<std::string> avoided;
  for (const std::string& id : ids) {
    auto done = cluster.WaitForState(id, pb::JOB_STATE_SUCCEEDED, absl::Seconds(240));
    ASSERT_TRUE(done.ok()) << id << ": " << done.status() << "\n" << cluster.DaemonLog();
    EXPECT_EQ(done->restart_count(), 0) << id;  // max_restarts untouched
    hardware_failures += done->hardware_requeues();
    for (const auto& card : done->avoided_cards()) avoided.insert(card);
  }
  // Eight jobs wait while the bad card is free, so a second one lands there: the rule's two
  // failures, both on that card; then it is out of service.
  EXPECT_EQ(hardware_failures, 2);
  ASSERT_EQ(avoided.size(), 1u);
  const std::string bad_device = avoided.begin()->substr(avoided.begin()->find('/') + 1);
  std::string out;
  ASSERT_EQ(cluster.RunCli({"devices", "--quarantined"}, &out), 0) << out;
  EXPECT_NE(out.find(bad_device), std::string::npos) << out;
  EXPECT_NE(out.find("uncorrectable ECC error encountered"), std::string::npos) << out;
  // Returned after repair (an operator's act): placeable again.
  ASSERT_EQ(cluster.RunCli({"return-card", "node-a", bad_device}, &out), 0) << out;
  ASSERT_EQ(cluster.RunCli({"devices", "--quarantined"}, &out), 0) << out;
  EXPECT_EQ(out.find(bad_device), std::string::npos) << out;
}

}  // namespace
}  // namespace hetpool::testing
