// Binding a placement the scheduler chose: the launch plans for each node, the job's next state
// (SCHEDULED, its generation, placement and rendezvous endpoint) stored, and only then the
// claims on the nodes and their orders. On any error nothing has changed.
#pragma once

#include "absl/status/status.h"
#include "planner/pool.h"
#include "scheduler/placement_policy.h"
#include "src/daemon/state/job_table.h"
#include "src/daemon/state/node_registry.h"

namespace hetpool::daemon {

// `prices`: the MFU of each class, by which a job's global batch is split across classes.
absl::Status BindPlacement(JobTable& jobs, NodeRegistry& nodes, JobEntry& entry, const scheduler::Placement& placement,
                           const planner::PriceTable& prices);

// What the job's placement on one node holds there: the claim a bind makes, and the one a
// restarted daemon rebuilds from the stored job.
Claim PlacedClaim(const pb::Job& job, const pb::NodePlacement& placement, uint64_t created_at_version);

}  // namespace hetpool::daemon
