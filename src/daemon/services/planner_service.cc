#include "src/daemon/services/planner_service.h"

#include "src/common/grpc_status.h"

namespace hetpool::daemon {

grpc::Status PlannerServiceImpl::Plan(grpc::ServerContext* ctx, const pb::PlanRequest* request,
                                      pb::PlanResponse* response) {
  HETPOOL_SERVE_OR_FORWARD(gate_, pb::PlannerService, Plan, ctx, request, response);
  auto plan = planner_->Plan(*request, state_->PlannerPool());
  if (!plan.ok()) return ToGrpcStatus(plan.status());
  *response = *std::move(plan);
  return grpc::Status::OK;
}

}  // namespace hetpool::daemon
