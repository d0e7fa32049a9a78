// PlannerService: `hetpoolctl plan` against the live pool (free capacity included).
#pragma once

#include "src/daemon/services/api_guard.h"
#include "src/daemon/services/leader_gate.h"

#include "hetpool/v1/planner.grpc.pb.h"
#include "src/daemon/planning/model_planner.h"
#include "src/daemon/state/cluster_state.h"

namespace hetpool::daemon {

class PlannerServiceImpl final : public pb::PlannerService::Service {
 public:
  PlannerServiceImpl(ClusterState* state, const ModelPlanner* planner, const LeaderGate* gate, const ApiGuard* guard)
      : state_(state), planner_(planner), gate_(gate), guard_(guard) {}

  grpc::Status Plan(grpc::ServerContext* context, const pb::PlanRequest* request, pb::PlanResponse* response) override;

 private:
  ClusterState* state_;
  const ModelPlanner* planner_;
  const LeaderGate* gate_;
  const ApiGuard* guard_;
};

}  // namespace hetpool::daemon
