// Between a job's protos and the scheduler's types: the placement request a spec makes, and the
// pending reason the scheduler gives back.
#pragma once

#include "hetpool/v1/job.pb.h"
#include "scheduler/framework/pending_reason.h"
#include "scheduler/placement_policy.h"

namespace hetpool::daemon {

namespace pb = ::hetpool::v1;

// For a spec that passed ValidateAndNormalizeSpec (job_validation.h).
scheduler::PlacementRequest ToPlacementRequest(const pb::JobSpec& spec);
pb::PendingReason ToProto(const scheduler::PendingReason& reason);

}  // namespace hetpool::daemon
