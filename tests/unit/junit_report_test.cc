// `hetpoolctl wait --junit`: one job as one JUnit test case, whichever way it ended.
#include "src/cli/junit_report.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "src/common/convert.h"

namespace hetpool::cli {
namespace {

namespace pb = ::hetpool::v1;

pb::Job Ended(pb::JobState state) {
  pb::Job job;
  job.set_id("job-000007");
  job.mutable_spec()->set_name("ddp <nightly>");
  job.mutable_spec()->set_user("ci");
  job.set_state(state);
  *job.mutable_created_at() = ToProtoTime(absl::FromUnixSeconds(1000));
  *job.mutable_started_at() = ToProtoTime(absl::FromUnixSeconds(1010));
  *job.mutable_finished_at() = ToProtoTime(absl::FromUnixSeconds(1052));
  return job;
}

TEST(JunitReport, ASucceededJobIsAPassingCase) {
  const std::string xml = JunitReport(Ended(pb::JOB_STATE_SUCCEEDED), false);
  EXPECT_TRUE(
      absl::StartsWith(xml, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites tests=\"1\" failures=\"0\""))
      << xml;
  EXPECT_TRUE(absl::StrContains(
      xml, "<testcase classname=\"hetpool.ci\" name=\"job-000007 ddp &lt;nightly&gt;\" time=\"42.000\"/>"))
      << xml;
}

TEST(JunitReport, TheJobsOwnFailureIsAFailureWithItsLastLines) {
  pb::Job job = Ended(pb::JOB_STATE_FAILED);
  job.set_reason("NonZeroExit");
  job.set_message("rank 2 on node-b exited with code 3: assert x < 1 & y > \"2\"");
  job.set_failure_origin(pb::FAILURE_ORIGIN_JOB);
  job.mutable_failure()->add_last_lines("Traceback (most recent call last):");
  job.mutable_failure()->add_last_lines("AssertionError\x01");
  const std::string xml = JunitReport(job, false);
  EXPECT_TRUE(absl::StrContains(xml, "failures=\"1\" errors=\"0\" skipped=\"0\"")) << xml;
  EXPECT_TRUE(absl::StrContains(
      xml,
      "<failure type=\"NonZeroExit\" message=\"NonZeroExit: rank 2 on node-b exited with code 3: assert x &lt; 1 "
      "&amp; y &gt; &quot;2&quot;\">Traceback (most recent call last):\nAssertionError</failure>"))
      << xml;
}

TEST(JunitReport, InfrastructureTimeoutAndCancellationAreNotTheJobsFailures) {
  pb::Job lost = Ended(pb::JOB_STATE_FAILED);
  lost.set_reason("NodeLost");
  lost.set_failure_origin(pb::FAILURE_ORIGIN_INFRASTRUCTURE);
  EXPECT_TRUE(absl::StrContains(JunitReport(lost, false), "<error type=\"NodeLost\"")) << JunitReport(lost, false);
  pb::Job running = Ended(pb::JOB_STATE_RUNNING);
  running.clear_finished_at();
  EXPECT_TRUE(absl::StrContains(JunitReport(running, true),
                                "<error type=\"Timeout\" message=\"still RUNNING when wait gave up\"/>"))
      << JunitReport(running, true);
  pb::Job cancelled = Ended(pb::JOB_STATE_CANCELLED);
  cancelled.set_reason("Cancelled");
  EXPECT_TRUE(absl::StrContains(JunitReport(cancelled, false), "skipped=\"1\"")) << JunitReport(cancelled, false);
  EXPECT_TRUE(absl::StrContains(JunitReport(cancelled, false), "<skipped message=\"Cancelled\"/>"));
}

}  // namespace
}  // namespace hetpool::cli
