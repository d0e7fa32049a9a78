// The daemon's side of the planner: plans a PlanRequest against the live pool (PlannerService)
// and turns a job submitted by model into devices, a fingerprint class and layout variables.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "hetpool/v1/job.pb.h"
#include "hetpool/v1/planner.pb.h"
#include "planner/planner.h"
#include "planner/pool.h"

namespace hetpool::daemon {

namespace pb = ::hetpool::v1;

class ModelPlanner {
 public:
  explicit ModelPlanner(planner::PriceTable prices) : prices_(std::move(prices)) {}
  const planner::PriceTable& prices() const { return prices_; }

  absl::StatusOr<pb::PlanResponse> Plan(const pb::PlanRequest& request,
                                        const std::vector<planner::PoolClass>& pool) const;

  // For a spec with a `model` section: picks the best feasible plan among the classes the spec's
  // requirements allow, and fills nnodes, devices_per_node and requirements.fingerprints.
  // Returns the chosen plan (the job records it; launches derive the HETPOOL_* layout variables
  // from it). Errors say why no class can run it.
  absl::StatusOr<pb::PlanRow> ResolveJob(pb::JobSpec& spec, const std::vector<planner::PoolClass>& pool) const;

 private:
  planner::PriceTable prices_;
};

}  // namespace hetpool::daemon
