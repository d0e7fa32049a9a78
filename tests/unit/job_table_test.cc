// JobTable: the store-first commit, the submission steps (ids, idempotency keys) and events.
#include "src/daemon/state/job_table.h"

#include <map>

#include "absl/strings/str_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "src/common/convert.h"
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

  pb::Job next = entry.job();
  next.set_state(pb::JOB_STATE_CANCELLED);
  parts.store.Refuse(true);
  const absl::Status refused = parts.jobs.Commit(entry, next);
  EXPECT_TRUE(absl::IsUnavailable(refused)) << refused;
  EXPECT_NE(refused.message().find("nothing was changed"), std::string::npos) << refused;
  EXPECT_EQ(entry.job().state(), pb::JOB_STATE_PENDING);
  EXPECT_EQ(entry.version, version);
  EXPECT_EQ(parts.wakeups.changes(), changes);  // nobody was told of a change that did not happen
  EXPECT_FALSE(parts.jobs.store_healthy());

  parts.store.Refuse(false);
  ASSERT_TRUE(parts.jobs.Commit(entry, next).ok());
  EXPECT_EQ(entry.job().state(), pb::JOB_STATE_CANCELLED);
  EXPECT_EQ(parts.store.StoredJob(entry.job().id()).state(), pb::JOB_STATE_CANCELLED);
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
  parts.jobs.Abandon(first);                                     // its write failed
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
  parts.Load({old}, /*highest_seq=*/7);  // the store handed out 7 before losing rows
  ASSERT_NE(parts.jobs.ByRequest({"alice", "nightly"}), nullptr);
  EXPECT_EQ(parts.jobs.NewJob(TrainingSpec(1, 1), "", nullptr).id(), "job-000008");
  EXPECT_TRUE(parts.jobs.Pending(nullptr).empty());
}

TEST(JobTable, EventsKeepTheSubmissionAndTheNewest) {
  StateParts parts;  // at most 3 events per job
  JobEntry& entry = parts.Submit(TrainingSpec(1, 1));
  pb::Job job = entry.job();
  for (int i = 0; i < 4; ++i) parts.jobs.AddEvent(job, "Step", std::to_string(i));
  ASSERT_EQ(job.events_size(), 3);
  EXPECT_EQ(job.events(0).reason(), "Submitted");
  EXPECT_EQ(job.events(1).message(), "2");
  EXPECT_EQ(job.events(2).message(), "3");
  EXPECT_EQ(job.events(2).time().seconds(), absl::ToUnixSeconds(parts.now));  // the injected clock
}

// `n` stored jobs submitted a minute apart from `start`, job-000001 the oldest; every third
// one is bob's, the rest alice's.
std::vector<pb::Job> Submitted(int n, absl::Time start) {
  std::vector<pb::Job> jobs;
  for (int i = 1; i <= n; ++i) {
    pb::Job job;
    job.set_id(absl::StrFormat("job-%06d", i));
    job.set_submit_seq(static_cast<uint64_t>(i));
    job.set_state(pb::JOB_STATE_SUCCEEDED);
    job.mutable_spec()->set_user(i % 3 == 0 ? "bob" : "alice");
    *job.mutable_created_at() = ToProtoTime(start + absl::Minutes(i));
    jobs.push_back(std::move(job));
  }
  return jobs;
}

// Walks every page of `request`, the ids in the order given.
std::vector<std::string> Walk(const JobTable& jobs, pb::ListJobsRequest request, int* pages = nullptr) {
  std::vector<std::string> ids;
  do {
    auto page = jobs.List(request);
    EXPECT_TRUE(page.ok()) << page.status();
    if (!page.ok()) break;
    for (const auto& job : page->jobs()) ids.push_back(job.id());
    request.set_page_token(page->next_page_token());
    if (pages != nullptr) ++*pages;
  } while (!request.page_token().empty());
  return ids;
}

TEST(JobTable, ListsNewestFirstInPagesThatNeitherRepeatNorSkip) {
  StateParts parts;
  const absl::Time start = absl::FromUnixSeconds(1'800'000'000);
  parts.Load(Submitted(7, start), 7);
  pb::ListJobsRequest request;
  request.set_newest_first(true);
  request.set_page_size(3);
  int pages = 0;
  EXPECT_EQ(Walk(parts.jobs, request, &pages),
            (std::vector<std::string>{"job-000007", "job-000006", "job-000005", "job-000004", "job-000003",
                                      "job-000002", "job-000001"}));
  EXPECT_EQ(pages, 3);
  request.set_newest_first(false);  // the API's default: submission order
  EXPECT_EQ(Walk(parts.jobs, request), (std::vector<std::string>{"job-000001", "job-000002", "job-000003", "job-000004",
                                                                 "job-000005", "job-000006", "job-000007"}));
  // A job submitted between two pages shows up at the front, not in the middle of the walk.
  request.set_newest_first(true);
  auto first = parts.jobs.List(request);
  ASSERT_TRUE(first.ok());
  parts.jobs.Admit(parts.jobs.NewJob(TrainingSpec(1, 1), "", nullptr));
  request.set_page_token(first->next_page_token());
  auto second = parts.jobs.List(request);
  ASSERT_TRUE(second.ok());
  ASSERT_GT(second->jobs_size(), 0);
  EXPECT_EQ(second->jobs(0).id(), "job-000004");
}

TEST(JobTable, ListFiltersByUserAndSubmissionTime) {
  StateParts parts;
  const absl::Time start = absl::FromUnixSeconds(1'800'000'000);
  parts.Load(Submitted(9, start), 9);
  pb::ListJobsRequest request;
  request.set_newest_first(true);
  request.set_user("bob");
  EXPECT_EQ(Walk(parts.jobs, request), (std::vector<std::string>{"job-000009", "job-000006", "job-000003"}));
  request.clear_user();
  *request.mutable_submitted_after() = ToProtoTime(start + absl::Minutes(4));   // job 4 on
  *request.mutable_submitted_before() = ToProtoTime(start + absl::Minutes(6));  // before job 6
  EXPECT_EQ(Walk(parts.jobs, request), (std::vector<std::string>{"job-000005", "job-000004"}));
}

TEST(JobTable, AFilterThatMatchesLittleAnswersInBoundedStepsAndStillFindsEverything) {
  // 45,000 jobs, bob's the one in three: the user nobody has gets pages of nothing, each after
  // looking at a bounded number of jobs, with a token to go on; the walk still ends.
  StateParts parts;
  parts.Load(Submitted(45'000, absl::FromUnixSeconds(1'800'000'000)), 45'000);
  pb::ListJobsRequest request;
  request.set_user("nobody");
  int pages = 0;
  EXPECT_TRUE(Walk(parts.jobs, request, &pages).empty());
  EXPECT_EQ(pages, 3);  // 20,000 looked at, 20,000, then the last 5,000
  request.set_user("bob");
  request.set_page_size(1000);
  EXPECT_EQ(Walk(parts.jobs, request).size(), 15'000u);
}

// Issue 19: a restart loads finished jobs as their stored bytes. Nothing a pass, a page, usage or
// retirement does parses them into the table: only a reader of the whole job in place does.
TEST(JobTable, LoadedFinishedJobsStayBytesThroughPagesUsageRetirementAndTheQueue) {
  StateParts parts;
  const absl::Time start = absl::FromUnixSeconds(1'800'000'000);
  std::vector<pb::Job> stored = Submitted(30, start);
  for (pb::Job& job : stored) {
    *job.mutable_started_at() = ToProtoTime(start + absl::Hours(1));
    *job.mutable_finished_at() = ToProtoTime(start + absl::Hours(2));
    (*job.mutable_spec()->mutable_labels())["team"] = job.submit_seq() % 2 == 0 ? "even" : "odd";
  }
  stored[4].set_request_id("nightly");
  parts.Load(stored, 30);
  JobEntry& waiting = parts.Submit(TrainingSpec(1, 1));
  auto kept_as_bytes = [&] {
    size_t n = 0;
    for (const auto& [id, entry] : parts.jobs.entries()) n += entry.kept_as_bytes() ? 1 : 0;
    return n;
  };
  EXPECT_EQ(kept_as_bytes(), 30u);

  pb::ListJobsRequest request;
  request.set_page_size(7);
  (*request.mutable_labels())["team"] = "even";
  std::vector<std::string> ids = Walk(parts.jobs, request);
  EXPECT_EQ(ids.size(), 15u);
  auto page = parts.jobs.List(pb::ListJobsRequest());
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->jobs_size(), 31);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(page->jobs(4), stored[4]));  // whole
  EXPECT_EQ(parts.jobs.RunningSince(start, "bob").size(), 10u);
  EXPECT_EQ(parts.jobs.FinishedBefore(start + absl::Hours(3), 100).size(), 30u);
  EXPECT_EQ(parts.jobs.Pending(nullptr).size(), 1u);
  EXPECT_EQ(kept_as_bytes(), 30u);

  // A job that ends is kept as its bytes too.
  pb::Job next = waiting.job();
  next.set_state(pb::JOB_STATE_CANCELLED);
  ASSERT_TRUE(parts.jobs.Commit(waiting, next).ok());
  EXPECT_EQ(kept_as_bytes(), 31u);
  EXPECT_TRUE(parts.jobs.Pending(nullptr).empty());
  // A retried submission's key reads the whole job in place: that one is parsed.
  ASSERT_NE(parts.jobs.ByRequest({"alice", "nightly"}), nullptr);
  EXPECT_EQ(parts.jobs.ByRequest({"alice", "nightly"})->id(), "job-000005");
  EXPECT_EQ(kept_as_bytes(), 30u);
}

TEST(JobTable, RetirementForgetsOnlyJobsUnchangedSinceTheyWereRead) {
  StateParts parts;
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    JobEntry& entry = parts.Submit(TrainingSpec(1, 1));
    pb::Job next = entry.job();
    next.set_state(pb::JOB_STATE_CANCELLED);
    *next.mutable_finished_at() = ToProtoTime(parts.now);
    ASSERT_TRUE(parts.jobs.Commit(entry, next).ok());
    ids.push_back(entry.job().id());
  }
  parts.now += absl::Hours(1);
  std::vector<JobTable::Retiring> due = parts.jobs.FinishedBefore(parts.now - absl::Minutes(30), 2);
  ASSERT_EQ(due.size(), 2u);  // at most the limit, oldest submissions first
  EXPECT_EQ(due[0].job.id(), ids[0]);
  EXPECT_EQ(due[1].job.id(), ids[1]);
  // The second changes while the archive is being written (without the state lock): it stays.
  JobEntry& changed = *parts.jobs.Find(ids[1]);
  pb::Job next = changed.job();
  next.set_message("changed after it was read");
  ASSERT_TRUE(parts.jobs.Commit(changed, next).ok());
  parts.jobs.Forget(due);
  EXPECT_EQ(parts.jobs.Find(ids[0]), nullptr);
  EXPECT_NE(parts.jobs.Find(ids[1]), nullptr);
  EXPECT_NE(parts.jobs.Find(ids[2]), nullptr);
  EXPECT_EQ(parts.jobs.FinishedBefore(parts.now + absl::Hours(1), 10).size(), 2u);
}

// The queue and the counts by state and priority (what a metrics scrape reads) are kept as
// states change, not walked over every live job: whatever a job goes through, Pending and
// ForEachPending name exactly the jobs whose state is PENDING, and counts() agrees with a count.
TEST(JobTable, TheQueueAndTheCountsFollowEveryStateChange) {
  StateParts parts;
  auto queued = [&] {
    std::vector<std::string> ids;
    parts.jobs.ForEachPending([&](const JobEntry& e) { ids.push_back(e.job().id()); });
    std::vector<std::string> walked;
    std::map<std::pair<int, int>, int64_t> counted;
    size_t live_elastic = 0;
    for (const auto& [id, entry] : parts.jobs.entries()) {
      if (entry.job().state() == pb::JOB_STATE_PENDING) walked.push_back(id);
      ++counted[{entry.job().state(), entry.job().spec().priority()}];
      live_elastic += !IsTerminal(entry.job().state()) && entry.job().spec().has_elastic_nnodes() ? 1 : 0;
    }
    EXPECT_EQ(parts.jobs.counts(), counted);
    EXPECT_EQ(parts.jobs.live_elastic(), live_elastic);
    EXPECT_EQ(ids, walked);  // submission order, which is id order here
    EXPECT_EQ(parts.jobs.Pending(nullptr).size(), ids.size());
    EXPECT_EQ(parts.jobs.pending_count(), ids.size());
    return ids;
  };
  pb::Job waiting;
  waiting.set_id("job-000002");
  waiting.set_submit_seq(2);
  waiting.set_state(pb::JOB_STATE_PENDING);
  waiting.mutable_spec()->mutable_elastic_nnodes()->set_max(2);  // and so is `done`
  pb::Job done = waiting;
  done.set_id("job-000001");
  done.set_submit_seq(1);
  done.set_state(pb::JOB_STATE_SUCCEEDED);
  parts.Load({done, waiting}, 2);
  EXPECT_EQ(queued(), std::vector<std::string>({"job-000002"}));

  pb::JobSpec elastic = TrainingSpec(1, 1);
  elastic.mutable_elastic_nnodes()->set_min(1);
  elastic.mutable_elastic_nnodes()->set_max(2);
  JobEntry& a = parts.Submit(elastic);  // job-000003
  EXPECT_EQ(parts.jobs.live_elastic(), 2u);
  pb::JobSpec urgent = TrainingSpec(1, 1);
  urgent.set_priority(7);
  JobEntry& b = parts.Submit(urgent);  // job-000004
  EXPECT_EQ(queued(), std::vector<std::string>({"job-000002", "job-000003", "job-000004"}));
  auto move_to = [&](JobEntry& entry, pb::JobState state) {
    pb::Job next = entry.job();
    next.set_state(state);
    *next.mutable_finished_at() = ToProtoTime(parts.now);
    ASSERT_TRUE(parts.jobs.Commit(entry, next).ok());
  };
  move_to(a, pb::JOB_STATE_SCHEDULED);
  move_to(b, pb::JOB_STATE_CANCELLED);
  EXPECT_EQ(queued(), std::vector<std::string>({"job-000002"}));
  move_to(a, pb::JOB_STATE_PENDING);  // restarted, preempted or resized: queued again
  EXPECT_EQ(queued(), std::vector<std::string>({"job-000002", "job-000003"}));

  parts.store.Refuse(true);  // a refused change leaves the job where it was
  pb::Job next = a.job();
  next.set_state(pb::JOB_STATE_SCHEDULED);
  EXPECT_FALSE(parts.jobs.Commit(a, next).ok());
  parts.store.Refuse(false);
  EXPECT_EQ(queued(), std::vector<std::string>({"job-000002", "job-000003"}));

  parts.now += absl::Hours(1);
  parts.jobs.Forget(parts.jobs.FinishedBefore(parts.now, 10));  // job-000001 and job-000004 retire
  EXPECT_EQ(parts.jobs.Find("job-000004"), nullptr);
  EXPECT_EQ(queued(), std::vector<std::string>({"job-000002", "job-000003"}));
  move_to(a, pb::JOB_STATE_FAILED);
  EXPECT_EQ(queued(), std::vector<std::string>({"job-000002"}));
  EXPECT_EQ(parts.jobs.live_elastic(), 1u);  // the loaded one still waits
}

}  // namespace
}  // namespace hetpool::daemon

namespace hetpool::daemon {
namespace {

using testing::StateParts;
using testing::TrainingSpec;

pb::JobSpec ArraySpec(int count, int max_running) {
  pb::JobSpec spec = TrainingSpec(1, 1);
  spec.mutable_array()->set_count(count);
  spec.mutable_array()->set_max_running(max_running);
  return spec;
}

// Moves a released task to `state` as the reconciler would (stored first).
void MoveTask(StateParts& parts, const std::string& id, pb::JobState state, int exit_code = 0) {
  JobEntry* task = parts.jobs.Find(id);
  ASSERT_NE(task, nullptr) << id;
  pb::Job next = task->job();
  next.set_state(state);
  if (state == pb::JOB_STATE_FAILED) {
    next.mutable_failure()->set_exit_code(exit_code);
    next.set_message(absl::StrCat("exited with code ", exit_code));
  }
  if (IsTerminal(state)) *next.mutable_finished_at() = ToProtoTime(parts.now);
  ASSERT_TRUE(parts.jobs.Commit(*task, next).ok());
}

// Issue 63: an array of 10,000 tasks is one store write at submission; its tasks are written as
// they are released, at most kMaxWaitingTasks waiting at a time, and only they are queued.
TEST(JobArrays, AnArrayIsStoredOnceAndItsTasksAsTheyAreReleased) {
  StateParts parts;
  const JobEntry& array = parts.Submit(ArraySpec(10000, 0));
  EXPECT_EQ(parts.store.job_writes(), 1);
  EXPECT_TRUE(parts.jobs.Pending(nullptr).empty());  // the array itself is never queued

  const std::vector<std::string> released = parts.jobs.ReleaseArrayTasks();
  ASSERT_EQ(released.size(), static_cast<size_t>(JobTable::kMaxWaitingTasks));
  EXPECT_EQ(parts.store.job_writes(), 1 + JobTable::kMaxWaitingTasks);
  EXPECT_EQ(released.front(), array.summary().id + ".0");
  EXPECT_EQ(parts.jobs.Pending(nullptr).size(), released.size());
  const pb::Job& task = parts.jobs.Find(released[7])->job();
  EXPECT_EQ(task.array_task().array(), array.summary().id);
  EXPECT_EQ(task.array_task().index(), 7);
  EXPECT_EQ(task.array_task().count(), 10000);
  EXPECT_FALSE(task.spec().has_array());
  EXPECT_EQ(parts.store.StoredJob(released[7]).state(), pb::JOB_STATE_PENDING);  // stored before queued
  EXPECT_TRUE(parts.jobs.ReleaseArrayTasks().empty());                           // the queue holds enough of them

  pb::Job shown = array.Copy();
  parts.jobs.ShowArray(shown);
  EXPECT_EQ(shown.array_tasks().count(), 10000);
  EXPECT_EQ(shown.array_tasks().waiting(), 10000);
  EXPECT_EQ(shown.state(), pb::JOB_STATE_PENDING);
}

// max_running bounds the tasks not ended; the array reads RUNNING while they run and ends with
// its last task, failing as its first failed task did.
TEST(JobArrays, MaxRunningBoundsTheTasksAndTheArrayEndsWithItsLast) {
  StateParts parts;
  const std::string id = parts.Submit(ArraySpec(3, 1)).summary().id;
  EXPECT_EQ(parts.jobs.ReleaseArrayTasks(), std::vector<std::string>{id + ".0"});
  EXPECT_TRUE(parts.jobs.ReleaseArrayTasks().empty());
  MoveTask(parts, id + ".0", pb::JOB_STATE_RUNNING);
  EXPECT_TRUE(parts.jobs.ReleaseArrayTasks().empty());
  pb::Job shown = parts.jobs.Find(id)->Copy();
  parts.jobs.ShowArray(shown);
  EXPECT_EQ(shown.state(), pb::JOB_STATE_RUNNING);
  EXPECT_EQ(shown.array_tasks().running(), 1);
  EXPECT_EQ(shown.array_tasks().waiting(), 2);

  MoveTask(parts, id + ".0", pb::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(parts.jobs.ReleaseArrayTasks(), std::vector<std::string>{id + ".1"});
  MoveTask(parts, id + ".1", pb::JOB_STATE_FAILED, 3);
  EXPECT_EQ(parts.jobs.ReleaseArrayTasks(), std::vector<std::string>{id + ".2"});
  EXPECT_EQ(parts.jobs.Find(id)->summary().state, pb::JOB_STATE_PENDING);  // one task still to end
  MoveTask(parts, id + ".2", pb::JOB_STATE_SUCCEEDED);
  const pb::Job& ended = parts.jobs.Find(id)->job();
  EXPECT_EQ(ended.state(), pb::JOB_STATE_FAILED);
  EXPECT_EQ(ended.failure().exit_code(), 3);
  EXPECT_NE(ended.message().find("3 tasks: 2 succeeded, 1 failed, 0 cancelled; the first to fail, " + id + ".1"),
            std::string::npos)
      << ended.message();
  EXPECT_EQ(parts.store.StoredJob(id).state(), pb::JOB_STATE_FAILED);
}

// A restart tells the released tasks by those it loads: none is released twice. A task not
// released yet can be cancelled on its own, and is then never released.
TEST(JobArrays, ARestartReleasesNoTaskTwiceAndAnUnreleasedTaskCanBeCancelled) {
  StateParts parts;
  const std::string id = parts.Submit(ArraySpec(5, 2)).summary().id;
  ASSERT_EQ(parts.jobs.ReleaseArrayTasks().size(), 2u);
  auto cancelled = parts.jobs.ReleaseCancelled(id + ".3", "not this one");
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ((*cancelled)->summary().state, pb::JOB_STATE_CANCELLED);
  EXPECT_FALSE(parts.jobs.ReleaseCancelled(id + ".9", "out of range").ok());

  StateParts restarted;
  std::vector<pb::Job> stored;
  for (const std::string& job : {id, id + ".0", id + ".1", id + ".3"}) stored.push_back(parts.store.StoredJob(job));
  restarted.Load(stored, 0);
  EXPECT_TRUE(restarted.jobs.ReleaseArrayTasks().empty());  // two wait already
  MoveTask(restarted, id + ".0", pb::JOB_STATE_SUCCEEDED);
  MoveTask(restarted, id + ".1", pb::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(restarted.jobs.ReleaseArrayTasks(), (std::vector<std::string>{id + ".2", id + ".4"}));
}

}  // namespace
}  // namespace hetpool::daemon
