#include "src/daemon/planning/model_planner.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "drivers/fingerprint/spec_table.h"
#include "src/common/plan_convert.h"

namespace hetpool::daemon {
namespace {

bool Allowed(const planner::PoolClass& cls, const pb::DeviceRequirements& req) {
  auto listed = [](const auto& list, const std::string& value) {
    return list.empty() || std::find(list.begin(), list.end(), value) != list.end();
  };
  return listed(req.vendors(), std::string(VendorName(cls.example.vendor))) &&
         listed(req.models(), cls.example.model) && listed(req.fingerprints(), cls.fingerprint);
}

}  // namespace

absl::StatusOr<pb::PlanResponse> ModelPlanner::Plan(const pb::PlanRequest& request,
                                                    const std::vector<planner::PoolClass>& pool) const {
  return AnswerPlan(request, pool, prices_);
}

absl::StatusOr<pb::PlanRow> ModelPlanner::ResolveJob(pb::JobSpec& spec,
                                                     const std::vector<planner::PoolClass>& pool) const {
  if (spec.nnodes() != 0 || spec.devices_per_node() != 0 || spec.device_milli() != 0) {
    return absl::InvalidArgumentError(
        "model: leave nnodes, devices_per_node and device_milli unset; the plan chooses the devices");
  }
  auto req = FromProto(spec.model());
  if (!req.ok()) return absl::InvalidArgumentError(absl::StrCat("model: ", req.status().message()));
  std::vector<planner::PoolClass> allowed;
  for (const planner::PoolClass& cls : pool) {
    if (Allowed(cls, spec.requirements())) allowed.push_back(cls);
  }
  if (allowed.empty()) {
    return absl::FailedPreconditionError(
        "model: no ready card in the pool matches the job's requirements, so there is nothing to plan on");
  }
  auto result = planner::MakePlan(*req, allowed, prices_);
  if (!result.ok()) return absl::Status(result.status().code(), absl::StrCat("model: ", result.status().message()));
  const auto best =
      std::find_if(result->plans.begin(), result->plans.end(), [](const planner::Plan& p) { return p.feasible; });
  if (best == result->plans.end()) {
    std::vector<std::string> why;
    for (const planner::Plan& p : result->plans) why.push_back(absl::StrCat(p.label, ": ", p.reason));
    return absl::FailedPreconditionError(absl::StrCat("model: no class of the pool can run it; ",
                                                      result->infeasible_summary, " [", absl::StrJoin(why, "; "), "]"));
  }
  pb::PlanRow row = ToProto(*best, req->workload);
  spec.set_nnodes(row.nodes());
  spec.set_devices_per_node(row.devices_per_node());
  spec.mutable_requirements()->clear_fingerprints();
  spec.mutable_requirements()->add_fingerprints(row.fingerprint());
  return row;
}

}  // namespace hetpool::daemon
