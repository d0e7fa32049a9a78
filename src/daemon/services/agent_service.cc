#include "src/daemon/services/agent_service.h"

#include "src/common/grpc_status.h"
#include "src/common/orders_parts.h"

namespace hetpool::daemon {

// Every agent call is about one node: the caller's certificate must name it. Registrations are
// audited; heartbeats, order streams and log pushes are too frequent to audit unless refused.

grpc::Status AgentServiceImpl::Register(grpc::ServerContext* ctx, const pb::RegisterRequest* req,
                                        pb::RegisterResponse* resp) {
  HETPOOL_RETURN_IF_NOT_LEADER(gate_);
  return Guarded(
      *guard_, ctx, "Register", Action::kAgent, req->node_name(),
      [&](const Caller& caller) -> absl::Status {
        if (auto s = CheckNodeIdentity(caller, req->node_name()); !s.ok()) return s;
        auto response = state_->Register(*req);
        if (!response.ok()) return response.status();
        *resp = *std::move(response);
        return absl::OkStatus();
      },
      /*audit_success=*/true);
}

grpc::Status AgentServiceImpl::Heartbeat(grpc::ServerContext* ctx, const pb::HeartbeatRequest* req,
                                         pb::HeartbeatResponse* resp) {
  HETPOOL_RETURN_IF_NOT_LEADER(gate_);
  return Guarded(
      *guard_, ctx, "Heartbeat", Action::kAgent, req->node_name(),
      [&](const Caller& caller) -> absl::Status {
        if (auto s = CheckNodeIdentity(caller, req->node_name()); !s.ok()) return s;
        auto response = state_->Heartbeat(*req);
        if (!response.ok()) return response.status();
        *resp = *std::move(response);
        return absl::OkStatus();
      },
      /*audit_success=*/false);
}

grpc::ServerWriteReactor<pb::Orders>* AgentServiceImpl::StreamOrders(grpc::CallbackServerContext* ctx,
                                                                     const pb::StreamOrdersRequest* req) {
  if (absl::Status not_leader = gate_->Check(); !not_leader.ok())
    return OrderStreams::Refused(ToGrpcStatus(not_leader));
  grpc::ServerWriteReactor<pb::Orders>* stream = nullptr;
  grpc::Status refused = Guarded(
      *guard_, ctx, "StreamOrders", Action::kAgent, req->node_name(),
      [&](const Caller& caller) -> absl::Status {
        if (auto s = CheckNodeIdentity(caller, req->node_name()); !s.ok()) return s;
        stream = order_streams_->Open(req->node_name(), req->session_id());
        return absl::OkStatus();
      },
      /*audit_success=*/false);
  return stream != nullptr ? stream : OrderStreams::Refused(refused);
}

grpc::Status AgentServiceImpl::PushLogs(grpc::ServerContext* ctx, const pb::PushLogsRequest* req,
                                        pb::PushLogsResponse* resp) {
  HETPOOL_RETURN_IF_NOT_LEADER(gate_);
  return Guarded(
      *guard_, ctx, "PushLogs", Action::kAgent, req->node_name(),
      [&](const Caller& caller) -> absl::Status {
        if (auto s = CheckNodeIdentity(caller, req->node_name()); !s.ok()) return s;
        if (req->data().size() > 4 * 1024 * 1024) return absl::InvalidArgumentError("data: at most 4 MiB per push");
        if (auto s = state_->CheckLogPush(req->node_name(), req->session_id(), req->job_id(), req->generation());
            !s.ok()) {
          return s;
        }
        auto end = logs_->Append(req->job_id(), req->generation(), req->node_name(), req->offset(), req->data());
        if (!end.ok()) return end.status();
        resp->set_next_offset(*end);
        return absl::OkStatus();
      },
      /*audit_success=*/false);
}

}  // namespace hetpool::daemon
