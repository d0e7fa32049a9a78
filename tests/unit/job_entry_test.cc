// JobEntry: a finished job kept as its stored bytes with a summary read off the wire, parsed only
// when the whole job is needed; and the summary reader against protobuf's own parse.
#include "src/daemon/state/job_entry.h"

#include <algorithm>

#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "src/common/convert.h"

namespace hetpool::daemon {
namespace {

using google::protobuf::util::MessageDifferencer;

// A job with every kind of field the summary reads and many it skips around them: nested
// messages, maps, repeated fields, a negative priority, a sequence past 32 bits, nanoseconds.
pb::Job Everything(pb::JobState state) {
  pb::Job job;
  job.set_id("job-4294967301");
  job.set_submit_seq(4'294'967'301ULL);
  job.set_state(state);
  job.set_reason("NonZeroExit");
  job.set_message("rank 3 exited with code 1");
  job.set_generation(7);
  job.set_request_id("6f1e2d7c-0b7a-4c43-9d3e-2b8f1f0c9a11");
  pb::JobSpec& spec = *job.mutable_spec();
  spec.set_name("llama-sft");
  spec.set_user("alice");
  spec.set_group("vision");
  spec.set_priority(-5);
  (*spec.mutable_labels())["team"] = "perception";
  (*spec.mutable_labels())["ci"] = "nightly";
  (*spec.mutable_labels())["empty"] = "";
  (*spec.mutable_env())["NCCL_DEBUG"] = "INFO";
  for (const char* a : {"torchrun", "train.py", "--lr", "3e-4"}) spec.add_command(a);
  spec.set_nnodes(2);
  spec.set_devices_per_node(8);
  spec.mutable_requirements()->add_vendors("nvidia");
  spec.mutable_preemption_grace()->set_seconds(30);
  pb::NodePlacement* placement = job.add_placement();
  placement->set_node("node-a");
  placement->add_device_ids("nvidia0");
  job.add_launch_plan()->set_node("node-a");
  for (int i = 0; i < 3; ++i) {
    pb::JobEvent* event = job.add_events();
    event->set_reason("Step");
    *event->mutable_time() = ToProtoTime(absl::FromUnixSeconds(1'800'000'000 + i));
  }
  *job.mutable_created_at() = ToProtoTime(absl::FromUnixNanos(1'800'000'000'123'456'789));
  *job.mutable_started_at() = ToProtoTime(absl::FromUnixSeconds(1'800'000'100));
  if (IsTerminal(state)) *job.mutable_finished_at() = ToProtoTime(absl::FromUnixSeconds(1'800'003'700));
  job.mutable_last_preemption()->set_by_job("job-000009");
  return job;
}

void ExpectSameSummary(JobSummary read, JobSummary parsed) {
  EXPECT_EQ(read.id, parsed.id);
  EXPECT_EQ(read.submit_seq, parsed.submit_seq);
  EXPECT_EQ(read.state, parsed.state);
  EXPECT_EQ(read.request_id, parsed.request_id);
  EXPECT_EQ(read.user, parsed.user);
  EXPECT_EQ(read.group, parsed.group);
  EXPECT_EQ(read.priority, parsed.priority);
  std::sort(read.labels.begin(), read.labels.end());  // a map's order on the wire is its own
  std::sort(parsed.labels.begin(), parsed.labels.end());
  EXPECT_EQ(read.labels, parsed.labels);
  EXPECT_EQ(read.created_at, parsed.created_at);
  EXPECT_EQ(read.started_at, parsed.started_at);
  EXPECT_EQ(read.finished_at, parsed.finished_at);
}

TEST(JobSummary, ReadOffTheWireItAgreesWithTheParsedJob) {
  for (pb::JobState state : {pb::JOB_STATE_SUCCEEDED, pb::JOB_STATE_RUNNING, pb::JOB_STATE_CANCELLED}) {
    const pb::Job job = Everything(state);
    auto read = ReadJobSummary(job.SerializeAsString());
    ASSERT_TRUE(read.ok()) << read.status();
    ExpectSameSummary(*read, SummaryOf(job));
    EXPECT_EQ(read->priority, -5);
    EXPECT_EQ(read->submit_seq, 4'294'967'301ULL);
    EXPECT_EQ(read->created_at, absl::FromUnixNanos(1'800'000'000'123'456'789));
    ASSERT_NE(read->Label("team"), nullptr);
    EXPECT_EQ(*read->Label("team"), "perception");
    EXPECT_EQ(read->Label("owner"), nullptr);
  }
  // A pending job that never started: no start or end time, and nothing set is nothing read.
  pb::Job pending;
  pending.set_id("job-000001");
  pending.set_state(pb::JOB_STATE_PENDING);
  auto read = ReadJobSummary(pending.SerializeAsString());
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSameSummary(*read, SummaryOf(pending));
  EXPECT_FALSE(read->started_at.has_value());
  EXPECT_TRUE(read->labels.empty());
}

TEST(JobSummary, BytesThatAreNotAWholeJobAreDataLoss) {
  const std::string whole = Everything(pb::JOB_STATE_SUCCEEDED).SerializeAsString();
  for (const std::string& bad :
       {whole.substr(0, whole.size() / 2), whole.substr(0, whole.size() - 1), std::string("\xff\xff\xff", 3),
        std::string("\x12\x40", 2) /* spec longer than all */, std::string("\x0b", 1) /* a group's start tag */}) {
    auto read = ReadJobSummary(bad);
    EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << bad.size();
    StoredRow row{"job-000042", bad};
    auto entry = JobEntry::FromStored(row);
    EXPECT_EQ(entry.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(entry.status().message().find("job-000042"), std::string::npos) << entry.status();
  }
}

TEST(JobEntry, AFinishedJobStaysItsBytesUntilTheWholeJobIsAskedFor) {
  const pb::Job finished = Everything(pb::JOB_STATE_FAILED);
  StoredRow row{finished.id(), finished.SerializeAsString()};
  const size_t stored_size = row.bytes.size();
  auto entry = JobEntry::FromStored(row);
  ASSERT_TRUE(entry.ok()) << entry.status();
  EXPECT_TRUE(entry->kept_as_bytes());
  EXPECT_EQ(entry->ByteSize(), stored_size);
  EXPECT_EQ(entry->summary().user, "alice");
  // A copy (list pages, get, watch, retirement) parses into the copy, not into the entry.
  EXPECT_TRUE(MessageDifferencer::Equals(entry->Copy(), finished));
  EXPECT_TRUE(entry->kept_as_bytes());
  // The whole job in place (a rare reader: a retried submission's key, a stale agent report).
  EXPECT_TRUE(MessageDifferencer::Equals(entry->job(), finished));
  EXPECT_FALSE(entry->kept_as_bytes());
  EXPECT_EQ(entry->ByteSize(), stored_size);

  // A job that can still change is parsed when it is loaded.
  const pb::Job running = Everything(pb::JOB_STATE_RUNNING);
  StoredRow running_row{running.id(), running.SerializeAsString()};
  auto live = JobEntry::FromStored(running_row);
  ASSERT_TRUE(live.ok()) << live.status();
  EXPECT_FALSE(live->kept_as_bytes());
  EXPECT_TRUE(MessageDifferencer::Equals(live->job(), running));
}

TEST(JobEntry, AJobThatEndsIsKeptAsBytesAndOneThatRestartsIsParsed) {
  JobEntry entry(Everything(pb::JOB_STATE_RUNNING));
  EXPECT_FALSE(entry.kept_as_bytes());
  const pb::Job ended = Everything(pb::JOB_STATE_SUCCEEDED);
  entry.Replace(ended);
  EXPECT_TRUE(entry.kept_as_bytes());
  EXPECT_EQ(entry.summary().state, pb::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(entry.summary().finished_at, absl::FromUnixSeconds(1'800'003'700));
  EXPECT_TRUE(MessageDifferencer::Equals(entry.Copy(), ended));

  const pb::Job again = Everything(pb::JOB_STATE_PENDING);
  entry.Replace(again);
  EXPECT_FALSE(entry.kept_as_bytes());
  EXPECT_EQ(entry.summary().state, pb::JOB_STATE_PENDING);
  EXPECT_TRUE(MessageDifferencer::Equals(entry.job(), again));
}

TEST(JobEntry, ARecordDamagedInsideAFieldIsAnsweredWithItsSummary) {
  // Well framed (the summary reads), but a launch plan inside is cut short: the parse fails
  // only when the whole job is asked for, long after the load.
  const pb::Job finished = Everything(pb::JOB_STATE_SUCCEEDED);
  StoredRow row{finished.id(), finished.SerializeAsString() + std::string("\x5a\x02\x0a\xff", 4)};
  auto entry = JobEntry::FromStored(row);
  ASSERT_TRUE(entry.ok()) << entry.status();
  EXPECT_TRUE(entry->kept_as_bytes());
  const pb::Job answered = entry->Copy();
  EXPECT_EQ(answered.id(), finished.id());
  EXPECT_EQ(answered.state(), pb::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(answered.spec().user(), "alice");
  EXPECT_EQ(answered.spec().labels().at("team"), "perception");
  EXPECT_EQ(answered.finished_at().seconds(), 1'800'003'700);
  EXPECT_EQ(answered.reason(), "StoredRecordDamaged");
  EXPECT_EQ(answered.events_size(), 0);
  // Loaded as a job that can still change, the same damage stops the load instead.
  const pb::Job running = Everything(pb::JOB_STATE_RUNNING);
  StoredRow running_row{running.id(), running.SerializeAsString() + std::string("\x5a\x02\x0a\xff", 4)};
  EXPECT_EQ(JobEntry::FromStored(running_row).status().code(), absl::StatusCode::kDataLoss);
}

TEST(JobEntry, StoredJobsDecodeOnSeveralThreadsInTheirOrder) {
  std::vector<StoredRow> rows;
  for (int i = 0; i < 10'000; ++i) {
    pb::Job job = Everything(i % 4 == 0 ? pb::JOB_STATE_RUNNING : pb::JOB_STATE_SUCCEEDED);
    job.set_id("job-" + std::to_string(i));
    rows.push_back({job.id(), job.SerializeAsString()});
  }
  rows[7'777].bytes = "\xff";
  rows[9'000].bytes = "\xff";
  auto bad = DecodeStoredJobs(rows);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("'job-7777'"), std::string::npos) << bad.status();  // the first
  rows[7'777].bytes = rows[7'776].bytes;
  rows[9'000].bytes = rows[8'999].bytes;
  auto entries = DecodeStoredJobs(std::move(rows));
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 10'000u);
  EXPECT_EQ((*entries)[42].summary().id, "job-42");
  EXPECT_FALSE((*entries)[40].kept_as_bytes());
  EXPECT_TRUE((*entries)[41].kept_as_bytes());
}

}  // namespace
}  // namespace hetpool::daemon
