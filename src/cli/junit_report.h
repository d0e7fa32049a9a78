// A JUnit XML report of one job, for CI systems that show test results natively (GitLab, Jenkins,
// GitHub Actions through a reporter): the job is one test case that passed, failed by its own
// doing (<failure>, with the failing rank's last lines), failed by the infrastructure or timed
// out (<error>), or was cancelled (<skipped>).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "hetpool/v1/job.pb.h"

namespace hetpool::cli {

// `timed_out`: `wait --timeout` passed before the job ended (`job` is its state then).
std::string JunitReport(const hetpool::v1::Job& job, bool timed_out);

// Writes the report to `path` (replaced whole: written beside it, then renamed).
absl::Status WriteJunitReport(const std::string& path, const hetpool::v1::Job& job, bool timed_out);

}  // namespace hetpool::cli
