// Usage accounting: card-hours and cost per job, user, group or card class over a window.
// A job counts while it runs: from each "Running" event to the next event that leaves RUNNING
// (a restart, the end), clipped to the window; its cards are nodes x devices x share, so a
// quarter-card job counts a quarter. Pure: tests feed jobs and a clock.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "hetpool/v1/job.pb.h"
#include "planner/pool.h"

namespace hetpool::daemon {

struct UsageWindow {
  absl::Time since;
  absl::Time until;
};

// INVALID_ARGUMENT for an unknown `by` or an empty window.
absl::StatusOr<hetpool::v1::UsageResponse> ComputeUsage(const std::vector<hetpool::v1::Job>& jobs,
                                                        const UsageWindow& window, const std::string& by,
                                                        const planner::PriceTable& prices);

// The hours a job ran inside the window.
double RunningHours(const hetpool::v1::Job& job, const UsageWindow& window);

// The spans a job ran (from its events), the last one ending at `now` while it still runs.
std::vector<UsageWindow> RunningSpans(const hetpool::v1::Job& job, absl::Time now);

}  // namespace hetpool::daemon
