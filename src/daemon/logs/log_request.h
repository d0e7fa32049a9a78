// Which node streams a GetJobLogs request may read: one node (a node name, and for the current
// generation one of the placement), the node of one global rank (with that node's local rank, to
// keep only its lines), or the whole placement. The request's fields never become a path: the
// log store opens streams by these validated names only.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hetpool/v1/job.pb.h"

namespace hetpool::daemon {

struct LogStream {
  std::string node;
  std::optional<int> local_rank;  // set: only that rank's lines
};

// INVALID_ARGUMENT naming the field (rank out of range, node not a name or not placed).
absl::StatusOr<std::vector<LogStream>> LogStreamsFor(const hetpool::v1::Job& job,
                                                     const hetpool::v1::GetJobLogsRequest& req, uint64_t generation);

// The global rank of each local rank on `node` in `generation`, when the job's current
// placement says (older generations' placements are not kept: empty).
std::vector<int> GlobalRanksOn(const hetpool::v1::Job& job, uint64_t generation, const std::string& node);

// Whether the agent started `generation`'s one process on `node` itself, without torchrun
// (NodeLaunchPlan.launcher "direct"): its lines are untagged. False for older generations.
bool StartedDirectly(const hetpool::v1::Job& job, uint64_t generation, const std::string& node);

// Whether `node` ran `generation` of the job and has exited, so its whole log was pushed.
bool NodeExited(const hetpool::v1::Job& job, uint64_t generation, const std::string& node);

}  // namespace hetpool::daemon
