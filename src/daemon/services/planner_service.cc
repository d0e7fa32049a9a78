#include "src/daemon/services/planner_service.h"

#include "src/common/grpc_status.h"

namespace hetpool::daemon {

grpc::Status PlannerServiceImpl::Plan(grpc::ServerContext*, const pb::PlanRequest* request,
                                      pb::PlanResponse* response) {
  HETPOOL_RETURN_IF_NOT_LEADER(gate_);
  auto plan = planner_->Plan(*request, state_->PlannerPool());
  if (!plan.ok()) return ToGrpcStatus(plan.status());
  *response = *std::move(plan);
  return grpc::Status::OK;
}

}  // namespace hetpool::daemon
