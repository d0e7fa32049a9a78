// Usage accounting on hand-made jobs: running intervals from events (restarts pause the clock),
// the window's clipping, fractional shares, grouping and the price table.
#include "src/daemon/accounting/usage.h"

#include "gtest/gtest.h"
#include "src/common/convert.h"

namespace hetpool::daemon {
namespace {

namespace pb = ::hetpool::v1;

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

void Event(pb::Job& job, pb::JobState state, absl::Duration at) {
  auto* e = job.add_events();
  e->set_state(state);
  *e->mutable_time() = ToProtoTime(kT0 + at);
}

pb::Job MakeJob(const std::string& id, const std::string& user, const std::string& group, int nodes, int devices,
                int milli, const std::string& fingerprint, const std::string& label) {
  pb::Job job;
  job.set_id(id);
  job.mutable_spec()->set_user(user);
  job.mutable_spec()->set_group(group);
  job.mutable_spec()->set_nnodes(nodes);
  job.mutable_spec()->set_devices_per_node(devices);
  job.mutable_spec()->set_device_milli(milli);
  auto* p = job.add_placement();
  p->set_fingerprint(fingerprint);
  p->set_class_label(label);
  *job.mutable_started_at() = ToProtoTime(kT0);
  return job;
}

TEST(Usage, RunningIntervalsRestartsAndTheWindow) {
  pb::Job job = MakeJob("job-1", "alice", "vision", 2, 4, 0, "fp-h100", "nvidia H100-SXM sm_90 80GiB");
  Event(job, pb::JOB_STATE_PENDING, absl::ZeroDuration());
  Event(job, pb::JOB_STATE_RUNNING, absl::Hours(1));  // runs 2 h ...
  Event(job, pb::JOB_STATE_PENDING, absl::Hours(3));  // ... a node is lost, queued again ...
  Event(job, pb::JOB_STATE_RUNNING, absl::Hours(4));  // ... runs 1 h more
  Event(job, pb::JOB_STATE_SUCCEEDED, absl::Hours(5));
  EXPECT_DOUBLE_EQ(RunningHours(job, {kT0, kT0 + absl::Hours(10)}), 3.0);
  // Clipped: the window starts in the middle of the first run.
  EXPECT_DOUBLE_EQ(RunningHours(job, {kT0 + absl::Hours(2), kT0 + absl::Hours(10)}), 2.0);
  EXPECT_DOUBLE_EQ(RunningHours(job, {kT0 + absl::Hours(6), kT0 + absl::Hours(10)}), 0.0);
  // Still running: counted up to the window's end.
  pb::Job running = MakeJob("job-2", "bob", "", 1, 1, 0, "fp-c500", "metax MXC500");
  Event(running, pb::JOB_STATE_RUNNING, absl::Hours(8));
  EXPECT_DOUBLE_EQ(RunningHours(running, {kT0, kT0 + absl::Hours(10)}), 2.0);
}

TEST(Usage, GroupsFractionsAndCost) {
  std::vector<pb::Job> jobs;
  jobs.push_back(MakeJob("job-1", "alice", "vision", 2, 4, 0, "fp-h100", "nvidia H100-SXM sm_90 80GiB"));  // 8 cards
  Event(jobs.back(), pb::JOB_STATE_RUNNING, absl::ZeroDuration());
  Event(jobs.back(), pb::JOB_STATE_SUCCEEDED, absl::Hours(2));  // 16 card-hours
  jobs.push_back(MakeJob("job-2", "alice", "vision", 1, 1, 250, "fp-h100", "nvidia H100-SXM sm_90 80GiB"));  // 1/4 card
  Event(jobs.back(), pb::JOB_STATE_RUNNING, absl::ZeroDuration());
  Event(jobs.back(), pb::JOB_STATE_FAILED, absl::Hours(4));  // 1 card-hour
  jobs.push_back(MakeJob("job-3", "bob", "nlp", 1, 2, 0, "fp-mlu", "cambricon MLU370-X8 mtp_372 48GiB"));
  Event(jobs.back(), pb::JOB_STATE_RUNNING, absl::ZeroDuration());
  Event(jobs.back(), pb::JOB_STATE_CANCELLED, absl::Hours(3));  // 6 card-hours
  auto prices = planner::ParsePriceTable(
      R"({"currency": "CNY", "classes": [{"match": "H100", "price_per_card_hour": 28}, {"match": "fp-mlu", "price_per_card_hour": 6}]})");
  ASSERT_TRUE(prices.ok()) << prices.status();
  const UsageWindow window{kT0, kT0 + absl::Hours(24)};

  auto by_user = ComputeUsage(jobs, window, "user", *prices);
  ASSERT_TRUE(by_user.ok()) << by_user.status();
  ASSERT_EQ(by_user->rows_size(), 2);
  EXPECT_EQ(by_user->rows(0).key(), "alice");  // most card-hours first
  EXPECT_DOUBLE_EQ(by_user->rows(0).card_hours(), 17.0);
  EXPECT_DOUBLE_EQ(by_user->rows(0).cost(), 17.0 * 28);
  EXPECT_EQ(by_user->rows(0).jobs(), 2);
  EXPECT_EQ(by_user->rows(1).key(), "bob");
  EXPECT_DOUBLE_EQ(by_user->rows(1).cost(), 36.0);
  EXPECT_DOUBLE_EQ(by_user->total_card_hours(), 23.0);
  EXPECT_DOUBLE_EQ(by_user->total_cost(), 17.0 * 28 + 36.0);
  EXPECT_EQ(by_user->currency(), "CNY");

  auto by_class = ComputeUsage(jobs, window, "class", *prices);
  ASSERT_TRUE(by_class.ok());
  ASSERT_EQ(by_class->rows_size(), 2);
  EXPECT_EQ(by_class->rows(0).fingerprint(), "fp-h100");
  EXPECT_EQ(by_class->rows(0).key(), "nvidia H100-SXM sm_90 80GiB");

  auto by_group = ComputeUsage(jobs, window, "group", *prices);
  ASSERT_TRUE(by_group.ok());
  EXPECT_EQ(by_group->rows(1).key(), "nlp");
  auto by_job = ComputeUsage(jobs, window, "job", *prices);
  ASSERT_TRUE(by_job.ok());
  EXPECT_EQ(by_job->rows_size(), 3);
  EXPECT_DOUBLE_EQ(by_job->rows(2).card_hours(), 1.0);  // the quarter card for four hours

  EXPECT_FALSE(ComputeUsage(jobs, window, "team", *prices).ok());
  EXPECT_FALSE(ComputeUsage(jobs, {kT0, kT0}, "user", *prices).ok());
}

}  // namespace
}  // namespace hetpool::daemon
