#include "src/daemon/services/planner_service.h"

#include "src/common/grpc_status.h"

namespace hetpool::daemon {

grpc::Status PlannerServiceImpl::Plan(grpc::ServerContext* ctx, const pb::PlanRequest* request,
                                      pb::PlanResponse* response) {
  HETPOOL_SERVE_OR_FORWARD(gate_, pb::PlannerService, Plan, ctx, request, response);
  return Guarded(*guard_, ctx, "Plan", Action::kPlan, request->model().preset(), [&](const Caller&) -> absl::Status {
    auto plan = planner_->Plan(*request, state_->PlannerPool());
    if (!plan.ok()) return plan.status();
    *response = *std::move(plan);
    return absl::OkStatus();
  });
}

}  // namespace hetpool::daemon
