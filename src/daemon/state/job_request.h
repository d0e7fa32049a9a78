// Between a job's protos and the scheduler's types: the placement request a spec makes, and the
// pending reason the scheduler gives back.
#pragma once

#include <vector>

#include "hetpool/v1/job.pb.h"
#include "scheduler/framework/pending_reason.h"
#include "scheduler/placement_policy.h"

namespace hetpool::daemon {

namespace pb = ::hetpool::v1;

// For a spec that passed ValidateAndNormalizeSpec (job_validation.h).
scheduler::PlacementRequest ToPlacementRequest(const pb::JobSpec& spec);
pb::PendingReason ToProto(const scheduler::PendingReason& reason);
// The node counts to offer a job, largest first: an elastic job's max down to its min, nnodes
// alone otherwise.
std::vector<int> ElasticSizes(const pb::JobSpec& spec);

}  // namespace hetpool::daemon
