// One conformance suite for every Store: SQLite (the embedded default) and etcd (a real etcd
// process on 127.0.0.1). Whatever the daemon relies on is checked against both.
#include <csignal>

#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "src/daemon/store/etcd_store.h"
#include "src/daemon/store/sqlite_store.h"
#include "tests/testing/etcd_process.h"
#include "tests/testing/temp_dir.h"

namespace hetpool::testing {
namespace {

using daemon::Store;
using google::protobuf::util::MessageDifferencer;

pb::Job MakeJob(uint64_t seq, const std::string& name) {
  pb::Job job;
  job.set_id("job-" + std::to_string(1000000 + seq));
  job.set_submit_seq(seq);
  job.mutable_spec()->set_name(name);
  job.mutable_spec()->set_user("alice");
  (*job.mutable_spec()->mutable_labels())["team"] = "nlp";
  job.mutable_spec()->add_command("train.py");
  job.set_state(pb::JOB_STATE_PENDING);
  return job;
}

class StoreConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "etcd") {
      etcd_ = std::make_unique<EtcdProcess>(dir_.path());
      ASSERT_TRUE(etcd_->Start().ok()) << etcd_->Log();
    }
    auto store = Open();
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }
  void TearDown() override {
    store_.reset();
    if (etcd_) etcd_->Kill(SIGTERM);
  }
  absl::StatusOr<std::unique_ptr<Store>> Open() {
    if (GetParam() == "sqlite") {
      auto s = daemon::SqliteStore::Open(dir_.path() + "/hetpool.db");
      if (!s.ok()) return s.status();
      return std::unique_ptr<Store>(*std::move(s));
    }
    auto s = daemon::EtcdStore::Open(etcd_->endpoint(), "/test/");
    if (!s.ok()) return s.status();
    return std::unique_ptr<Store>(*std::move(s));
  }

  TempDir dir_;
  std::unique_ptr<EtcdProcess> etcd_;
  std::unique_ptr<Store> store_;
};

TEST_P(StoreConformance, EmptyStoreLoadsNothing) {
  EXPECT_TRUE(store_->LoadJobs()->empty());
  EXPECT_TRUE(store_->LoadNodes()->empty());
}

TEST_P(StoreConformance, JobsRoundTripReplaceByIdAndComeBackInSubmissionOrder) {
  for (uint64_t seq : {3, 1, 2}) ASSERT_TRUE(store_->PutJob(MakeJob(seq, "first")).ok());
  pb::Job changed = MakeJob(2, "second");
  changed.set_state(pb::JOB_STATE_RUNNING);
  changed.set_generation(4);
  ASSERT_TRUE(store_->PutJob(changed).ok());
  auto jobs = store_->LoadJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 3u);
  EXPECT_EQ((*jobs)[0].submit_seq(), 1u);
  EXPECT_EQ((*jobs)[2].submit_seq(), 3u);
  EXPECT_TRUE(MessageDifferencer::Equals((*jobs)[1], changed)) << (*jobs)[1].DebugString();
}

TEST_P(StoreConformance, NodesRoundTrip) {
  pb::Node node;
  node.set_name("node-a");
  node.set_address("10.0.0.1");
  node.set_drained(true);
  (*node.mutable_labels())["rack"] = "r1";
  node.mutable_inventory()->add_devices()->set_id("nvidia0");
  ASSERT_TRUE(store_->PutNode(node).ok());
  node.set_drained(false);
  ASSERT_TRUE(store_->PutNode(node).ok());
  auto nodes = store_->LoadNodes();
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_TRUE(MessageDifferencer::Equals(nodes->front(), node));
}

TEST_P(StoreConformance, ASecondClientSeesEverythingAcknowledged) {
  for (uint64_t seq = 1; seq <= 1200; ++seq) ASSERT_TRUE(store_->PutJob(MakeJob(seq, "bulk")).ok());
  store_.reset();  // the first client is gone; only what was durable remains
  auto reopened = Open();
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  auto jobs = (*reopened)->LoadJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 1200u);  // more than one page of etcd ranges
  for (size_t i = 0; i < jobs->size(); ++i) EXPECT_EQ((*jobs)[i].submit_seq(), i + 1);
}

// Retention: archived jobs leave LoadJobs, stay readable one by one and by finish time; dropped
// ones are gone; either way the highest job number stays (ids are never handed out twice). More
// jobs than one etcd transaction holds.
TEST_P(StoreConformance, ArchivedJobsLeaveTheLiveSetAndKeepTheirNumbers) {
  std::vector<pb::Job> finished;
  for (uint64_t seq = 1; seq <= 100; ++seq) {
    pb::Job job = MakeJob(seq, "done");
    job.set_state(pb::JOB_STATE_SUCCEEDED);
    job.mutable_finished_at()->set_seconds(1'800'000'000 + static_cast<int64_t>(seq) * 60);
    ASSERT_TRUE(store_->PutJob(job).ok());
    finished.push_back(job);
  }
  ASSERT_TRUE(store_->PutJob(MakeJob(101, "live")).ok());
  ASSERT_TRUE(store_->ArchiveJobs({finished.begin(), finished.begin() + 90}, /*keep=*/true).ok());
  ASSERT_TRUE(store_->ArchiveJobs({finished.begin() + 90, finished.end()}, /*keep=*/false).ok());
  store_.reset();
  auto reopened = Open();
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  Store& store = **reopened;
  auto live = store.LoadJobs();
  ASSERT_TRUE(live.ok()) << live.status();
  ASSERT_EQ(live->size(), 1u);
  EXPECT_EQ(live->front().submit_seq(), 101u);
  auto kept = store.GetArchivedJob(finished[41].id());
  ASSERT_TRUE(kept.ok()) << kept.status();
  ASSERT_TRUE(kept->has_value());
  EXPECT_TRUE(MessageDifferencer::Equals(**kept, finished[41]));
  auto dropped = store.GetArchivedJob(finished[95].id());
  ASSERT_TRUE(dropped.ok());
  EXPECT_FALSE(dropped->has_value());
  // Finished at or after the 81st minute: jobs 81..90 (91..100 were dropped).
  auto recent = store.ArchivedJobsSince(absl::FromUnixSeconds(1'800'000'000 + 81 * 60));
  ASSERT_TRUE(recent.ok()) << recent.status();
  EXPECT_EQ(recent->size(), 10u);
  // The live job 101 is the highest; the archive's and the drops' numbers are kept apart.
  auto highest = store.HighestJobSeq();
  ASSERT_TRUE(highest.ok());
  EXPECT_GE(*highest, 100u);
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreConformance, ::testing::Values("sqlite", "etcd"),
                         [](const auto& param_info) { return param_info.param; });

// etcd only: the member killed with SIGKILL and restarted on its data loses nothing acknowledged;
// an unreachable endpoint is skipped; no reachable endpoint is a clear error.
TEST(EtcdStore, SurvivesKillNineOfEtcdAndFailsOverAcrossEndpoints) {
  TempDir dir;
  EtcdProcess etcd(dir.path());
  ASSERT_TRUE(etcd.Start().ok()) << etcd.Log();
  const std::string dead = "127.0.0.1:" + std::to_string(FreeTcpPort());
  auto store = daemon::EtcdStore::Open(dead + "," + etcd.endpoint(), "/t/", absl::Seconds(2));
  ASSERT_TRUE(store.ok()) << store.status();
  for (uint64_t seq = 1; seq <= 20; ++seq) ASSERT_TRUE((*store)->PutJob(MakeJob(seq, "acked")).ok());
  etcd.Kill(SIGKILL);
  EXPECT_EQ((*store)->PutJob(MakeJob(21, "lost")).code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(etcd.Start().ok()) << etcd.Log();
  auto jobs = (*store)->LoadJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->size(), 20u);
  etcd.Kill(SIGTERM);

  auto none = daemon::EtcdStore::Open(dead, "/t/", absl::Milliseconds(500));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("etcd store: no endpoint of " + dead + " answers"), std::string::npos)
      << none.status();
}

}  // namespace
}  // namespace hetpool::testing
