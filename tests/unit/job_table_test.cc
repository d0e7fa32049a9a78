// JobTable: the store-first commit, the submission steps (ids, idempotency keys) and events.
#include "src/daemon/state/job_table.h"

#include "gtest/gtest.h"
#include "tests/testing/state_parts.h"

namespace hetpool::daemon {
namespace {

using testing::StateParts;
using testing::TrainingSpec;

TEST(JobTable, ACommitIsStoredBeforeItIsSeenAndARefusedOneChangesNothing) {
  StateParts parts;
  JobEntry& entry = parts.Submit(TrainingSpec(1, 1));
  const uint64_t version = entry.version;
  const uint64_t changes = parts.wakeups.changes();

  pb::Job next = entry.job;
  next.set_state(pb::JOB_STATE_CANCELLED);
  parts.store.Refuse(true);
  const absl::Status refused = parts.jobs.Commit(entry, next);
  EXPECT_TRUE(absl::IsUnavailable(refused)) << refused;
  EXPECT_NE(refused.message().find("nothing was changed"), std::string::npos) << refused;
  EXPECT_EQ(entry.job.state(), pb::JOB_STATE_PENDING);
  EXPECT_EQ(entry.version, version);
  EXPECT_EQ(parts.wakeups.changes(), changes);  // nobody was told of a change that did not happen
  EXPECT_FALSE(parts.jobs.store_healthy());

  parts.store.Refuse(false);
  ASSERT_TRUE(parts.jobs.Commit(entry, next).ok());
  EXPECT_EQ(entry.job.state(), pb::JOB_STATE_CANCELLED);
  EXPECT_EQ(parts.store.StoredJob(entry.job.id()).state(), pb::JOB_STATE_CANCELLED);
  EXPECT_EQ(entry.version, version + 1);
  EXPECT_GT(parts.wakeups.changes(), changes);
  EXPECT_TRUE(parts.jobs.store_healthy());
}

TEST(JobTable, SubmissionsTakeIdsInOrderAndAnAbandonedOneBurnsItsId) {
  StateParts parts;
  pb::Job first = parts.jobs.NewJob(TrainingSpec(1, 1), "key-1", nullptr);
  EXPECT_EQ(first.id(), "job-000001");
  EXPECT_EQ(first.state(), pb::JOB_STATE_PENDING);
  EXPECT_TRUE(parts.jobs.InFlight({"alice", "key-1"}));
  EXPECT_EQ(parts.jobs.ByRequest({"alice", "key-1"}), nullptr);  // not stored yet
  parts.jobs.Abandon(first);                                      // its write failed
  EXPECT_FALSE(parts.jobs.InFlight({"alice", "key-1"}));
  EXPECT_EQ(parts.jobs.Find(first.id()), nullptr);

  pb::Job second = parts.jobs.NewJob(TrainingSpec(1, 1), "key-1", nullptr);
  EXPECT_EQ(second.id(), "job-000002");
  const pb::Job& admitted = parts.jobs.Admit(second);
  EXPECT_EQ(admitted.id(), "job-000002");
  ASSERT_NE(parts.jobs.ByRequest({"alice", "key-1"}), nullptr);
  EXPECT_EQ(parts.jobs.ByRequest({"alice", "key-1"})->id(), "job-000002");
  EXPECT_EQ(parts.jobs.ByRequest({"bob", "key-1"}), nullptr);  // keys are each user's own
  EXPECT_EQ(parts.jobs.Pending(nullptr).size(), 1u);
}

TEST(JobTable, LoadedJobsKeepTheirKeysAndIdsContinueAboveTheHighestRecorded) {
  StateParts parts;
  pb::Job old;
  old.set_id("job-000003");
  old.set_submit_seq(3);
  old.set_request_id("nightly");
  old.mutable_spec()->set_user("alice");
  old.set_state(pb::JOB_STATE_SUCCEEDED);
  parts.jobs.Load({old}, /*highest_seq=*/7);  // the store handed out 7 before losing rows
  ASSERT_NE(parts.jobs.ByRequest({"alice", "nightly"}), nullptr);
  EXPECT_EQ(parts.jobs.NewJob(TrainingSpec(1, 1), "", nullptr).id(), "job-000008");
  EXPECT_TRUE(parts.jobs.Pending(nullptr).empty());
}

TEST(JobTable, EventsKeepTheSubmissionAndTheNewest) {
  StateParts parts;  // at most 3 events per job
  JobEntry& entry = parts.Submit(TrainingSpec(1, 1));
  pb::Job job = entry.job;
  for (int i = 0; i < 4; ++i) parts.jobs.AddEvent(job, "Step", std::to_string(i));
  ASSERT_EQ(job.events_size(), 3);
  EXPECT_EQ(job.events(0).reason(), "Submitted");
  EXPECT_EQ(job.events(1).message(), "2");
  EXPECT_EQ(job.events(2).message(), "3");
  EXPECT_EQ(job.events(2).time().seconds(), absl::ToUnixSeconds(parts.now));  // the injected clock
}

}  // namespace
}  // namespace hetpool::daemon
