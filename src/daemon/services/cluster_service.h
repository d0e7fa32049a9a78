// ClusterService: operators' view of nodes and devices, and draining.
#pragma once

#include "src/daemon/services/api_guard.h"
#include "src/daemon/services/leader_gate.h"

#include "hetpool/v1/cluster.grpc.pb.h"
#include "src/daemon/state/cluster_state.h"

namespace hetpool::daemon {

class ClusterServiceImpl final : public hetpool::v1::ClusterService::Service {
 public:
  ClusterServiceImpl(ClusterState* state, const LeaderGate* gate, const ApiGuard* guard)
      : state_(state), gate_(gate), guard_(guard) {}

  grpc::Status ListNodes(grpc::ServerContext* ctx, const pb::ListNodesRequest* req,
                         pb::ListNodesResponse* resp) override;
  grpc::Status GetNode(grpc::ServerContext* ctx, const pb::GetNodeRequest* req, pb::Node* resp) override;
  grpc::Status ListDevices(grpc::ServerContext* ctx, const pb::ListDevicesRequest* req,
                           pb::ListDevicesResponse* resp) override;
  grpc::Status DrainNode(grpc::ServerContext* ctx, const pb::DrainNodeRequest* req, pb::Node* resp) override;
  grpc::Status UndrainNode(grpc::ServerContext* ctx, const pb::DrainNodeRequest* req, pb::Node* resp) override;
  grpc::Status ReturnCard(grpc::ServerContext* ctx, const pb::ReturnCardRequest* req, pb::Node* resp) override;
  grpc::Status ListFingerprints(grpc::ServerContext* ctx, const pb::ListFingerprintsRequest* req,
                                pb::ListFingerprintsResponse* resp) override;
  grpc::Status ListQueues(grpc::ServerContext* ctx, const pb::ListQueuesRequest* req,
                          pb::ListQueuesResponse* resp) override;

 private:
  grpc::Status SetDrained(grpc::ServerContext* ctx, const pb::DrainNodeRequest* req, pb::Node* resp, bool drained);

  ClusterState* state_;
  const LeaderGate* gate_;
  const ApiGuard* guard_;
};

}  // namespace hetpool::daemon
