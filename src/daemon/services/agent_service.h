// AgentService: the node agents' side of the control plane (see proto/hetpool/v1/agent.proto).
#pragma once

#include "src/daemon/services/api_guard.h"
#include "src/daemon/services/leader_gate.h"

#include "hetpool/v1/agent.grpc.pb.h"
#include "src/daemon/logs/log_store.h"
#include "src/daemon/services/order_streams.h"
#include "src/daemon/state/cluster_state.h"

namespace hetpool::daemon {

// StreamOrders is served by callback (OrderStreams: no thread per agent); the rest synchronously.
class AgentServiceImpl final
    : public hetpool::v1::AgentService::WithCallbackMethod_StreamOrders<hetpool::v1::AgentService::Service> {
 public:
  AgentServiceImpl(ClusterState* state, OrderStreams* order_streams, LogStore* logs, const LeaderGate* gate,
                   const ApiGuard* guard)
      : state_(state), order_streams_(order_streams), logs_(logs), gate_(gate), guard_(guard) {}

  grpc::Status Register(grpc::ServerContext* ctx, const pb::RegisterRequest* req, pb::RegisterResponse* resp) override;
  grpc::Status Heartbeat(grpc::ServerContext* ctx, const pb::HeartbeatRequest* req,
                         pb::HeartbeatResponse* resp) override;
  grpc::ServerWriteReactor<pb::Orders>* StreamOrders(grpc::CallbackServerContext* ctx,
                                                     const pb::StreamOrdersRequest* req) override;
  grpc::Status PushLogs(grpc::ServerContext* ctx, const pb::PushLogsRequest* req, pb::PushLogsResponse* resp) override;

 private:
  ClusterState* state_;
  OrderStreams* order_streams_;
  LogStore* logs_;
  const LeaderGate* gate_;
  const ApiGuard* guard_;
};

}  // namespace hetpool::daemon
