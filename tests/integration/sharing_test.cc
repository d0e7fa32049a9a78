// Fair-share queues on a live pool (issue 16, item 1): hetpoold --queues, freed cards going to
// the group below its share rather than to the earlier submission, `hetpoolctl queues` (with its
// users' rows), and the file re-read when it changes.
#include <fstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/cluster_harness.h"
#include "tests/testing/eventually.h"

namespace hetpool::testing {
namespace {

class SharingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TestCluster::Options options = TestCluster::ExamplePool();
    cluster_ = std::make_unique<TestCluster>(options);
    queues_file_ = cluster_->dir() + "/queues.json";
    WriteQueues(R"({"usage_half_life": "1h", "groups": {"vision": {"weight": 1}, "nlp": {"nominal": {"nvidia": 2}}}})");
    cluster_->mutable_options().daemon_args = {"--queues", queues_file_};
    ASSERT_TRUE(cluster_->Start().ok()) << cluster_->DaemonLog();
  }
  void WriteQueues(const std::string& text) {
    const std::string tmp = queues_file_ + ".tmp";
    std::ofstream(tmp) << text;
    std::rename(tmp.c_str(), queues_file_.c_str());
  }
  // A one-H100 job of `group` that runs until it is cancelled.
  pb::Job SubmitLong(const std::string& group) {
    pb::JobSpec spec = cluster_->TrainSpec(1, 1, {"--steps", "100000", "--step-sleep", "0.5"});
    spec.set_group(group);
    spec.mutable_requirements()->add_vendors("nvidia");
    auto job = cluster_->Submit(spec);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : pb::Job();
  }
  nlohmann::json Queues() {
    std::string out;
    EXPECT_EQ(cluster_->RunCli({"queues", "-o", "json"}, &out), 0) << out;
    return nlohmann::json::parse(out, nullptr, false);
  }
  static nlohmann::json Row(const nlohmann::json& queues, const std::string& group) {
    for (const auto& row : queues["queues"]) {
      if (row.value("group", "") == group) return row;
    }
    return nlohmann::json();
  }

  std::unique_ptr<TestCluster> cluster_;
  std::string queues_file_;
};

TEST_F(SharingTest, FreedCardsGoToTheGroupBelowItsShareAndQueuesShowsIt) {
  // vision fills the four H100s: it borrows nlp's two.
  std::vector<pb::Job> first;
  for (int i = 0; i < 4; ++i) first.push_back(SubmitLong("vision"));
  for (const auto& job : first) {
    ASSERT_TRUE(cluster_->WaitForState(job.id(), pb::JOB_STATE_RUNNING, absl::Seconds(60)).ok()) << job.id();
  }
  // vision asks for two more cards, then nlp for two: in submission order vision is first.
  const pb::Job later1 = SubmitLong("vision"), later2 = SubmitLong("vision");
  const pb::Job nlp1 = SubmitLong("nlp"), nlp2 = SubmitLong("nlp");
  auto queues = Queues();
  EXPECT_EQ(queues["fair_share"], true) << queues.dump();
  EXPECT_EQ(Row(queues, "vision")["used"], 4) << queues.dump();
  // vision is entitled to every card nlp does not own: 2 H100s, 2 MLUs, 2 MXC500s.
  EXPECT_EQ(Row(queues, "vision")["entitled"], 6) << queues.dump();
  EXPECT_EQ(Row(queues, "vision")["borrowed"], 2) << queues.dump();
  EXPECT_EQ(Row(queues, "nlp")["waiting"], 2) << queues.dump();
  EXPECT_EQ(Row(queues, "nlp")["entitled"], 2) << queues.dump();
  // Within the group, a row per user: here one, entitled to all the group has (its 6 and the 2
  // H100s it borrows), and holding exactly its part of the H100s.
  const nlohmann::json vision_users = Row(queues, "vision")["users"];
  ASSERT_EQ(vision_users.size(), 1u) << queues.dump();
  EXPECT_EQ(vision_users[0]["user"], "tester") << queues.dump();
  EXPECT_EQ(vision_users[0]["used"], 4) << queues.dump();
  EXPECT_EQ(vision_users[0]["entitled"], 8) << queues.dump();
  EXPECT_EQ(vision_users[0]["share"], 1) << queues.dump();
  EXPECT_EQ(vision_users[0]["pending_jobs"], 2) << queues.dump();

  // Two of vision's jobs end: the freed cards go to nlp, which is below its share.
  std::string out;
  ASSERT_EQ(cluster_->RunCli({"cancel", first[0].id()}, &out), 0) << out;
  ASSERT_EQ(cluster_->RunCli({"cancel", first[1].id()}, &out), 0) << out;
  ASSERT_TRUE(cluster_->WaitForState(nlp1.id(), pb::JOB_STATE_RUNNING, absl::Seconds(60)).ok());
  ASSERT_TRUE(cluster_->WaitForState(nlp2.id(), pb::JOB_STATE_RUNNING, absl::Seconds(60)).ok());
  auto later = cluster_->Get(later1.id());
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(later->state(), pb::JOB_STATE_PENDING);
  queues = Queues();
  EXPECT_EQ(Row(queues, "nlp")["used"], 2) << queues.dump();
  EXPECT_EQ(Row(queues, "vision")["pending_jobs"], 2) << queues.dump();
  ASSERT_EQ(cluster_->RunCli({"queues"}, &out), 0) << out;
  EXPECT_NE(out.find("fair share on"), std::string::npos) << out;
  EXPECT_NE(out.find("nvidia:2"), std::string::npos) << out;
  EXPECT_EQ(out.find("vision/tester"), std::string::npos) << "user rows only with --users: " << out;
  ASSERT_EQ(cluster_->RunCli({"queues", "--users"}, &out), 0) << out;
  EXPECT_NE(out.find("vision/tester"), std::string::npos) << out;

  // A changed file is read again without a restart; a broken one keeps the last good.
  WriteQueues("{broken");
  Eventually([&] { return cluster_->DaemonLog().find("changed but is not valid") != std::string::npos; },
             absl::Seconds(20));
  ASSERT_NE(cluster_->DaemonLog().find("changed but is not valid"), std::string::npos);
  queues = Queues();
  EXPECT_EQ(queues["fair_share"], true);
  EXPECT_EQ(Row(queues, "nlp")["entitled"], 2) << queues.dump();
  WriteQueues(R"({"groups": {"vision": {"weight": 5}, "nlp": {"nominal": {"nvidia": 2}}}})");
  Eventually([&] { return Row(Queues(), "vision")["weight"] == 5; }, absl::Seconds(20));
  EXPECT_EQ(Row(Queues(), "vision")["weight"], 5);
  for (const auto& job : {first[2], first[3], nlp1, nlp2, later1, later2}) {
    ASSERT_EQ(cluster_->RunCli({"cancel", job.id()}, &out), 0) << out;
  }
}

}  // namespace
}  // namespace hetpool::testing
