#include "src/daemon/services/agent_service.h"

#include "src/common/grpc_status.h"

namespace hetpool::daemon {

grpc::Status AgentServiceImpl::Register(grpc::ServerContext*, const pb::RegisterRequest* req,
                                        pb::RegisterResponse* resp) {
  HETPOOL_RETURN_IF_NOT_LEADER(gate_);
  auto response = state_->Register(*req);
  if (!response.ok()) return ToGrpcStatus(response.status());
  *resp = *std::move(response);
  return grpc::Status::OK;
}

grpc::Status AgentServiceImpl::Heartbeat(grpc::ServerContext*, const pb::HeartbeatRequest* req,
                                         pb::HeartbeatResponse*) {
  HETPOOL_RETURN_IF_NOT_LEADER(gate_);
  return ToGrpcStatus(state_->Heartbeat(*req));
}

grpc::Status AgentServiceImpl::StreamOrders(grpc::ServerContext* ctx, const pb::StreamOrdersRequest* req,
                                            grpc::ServerWriter<pb::Orders>* writer) {
  HETPOOL_RETURN_IF_NOT_LEADER(gate_);
  uint64_t sent = 0;
  while (!ctx->IsCancelled()) {
    auto orders = state_->WaitOrders(req->node_name(), req->session_id(), sent,
                                     absl::Now() + absl::Milliseconds(500));
    if (!orders.ok()) return ToGrpcStatus(orders.status());
    if (!orders->has_value()) continue;
    sent = (*orders)->version();
    if (!writer->Write(**orders)) return grpc::Status::CANCELLED;
  }
  return grpc::Status::CANCELLED;
}

grpc::Status AgentServiceImpl::PushLogs(grpc::ServerContext*, const pb::PushLogsRequest* req,
                                        pb::PushLogsResponse* resp) {
  HETPOOL_RETURN_IF_NOT_LEADER(gate_);
  if (req->data().size() > 4 * 1024 * 1024) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "data: at most 4 MiB per push");
  }
  if (auto s = state_->CheckLogPush(req->node_name(), req->session_id(), req->job_id(), req->generation());
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  auto end = logs_->Append(req->job_id(), req->generation(), req->node_name(), req->offset(), req->data());
  if (!end.ok()) return ToGrpcStatus(end.status());
  resp->set_next_offset(*end);
  return grpc::Status::OK;
}

}  // namespace hetpool::daemon
