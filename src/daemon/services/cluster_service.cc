#include "src/daemon/services/cluster_service.h"

#include "src/common/grpc_status.h"

namespace hetpool::daemon {

grpc::Status ClusterServiceImpl::ListNodes(grpc::ServerContext* ctx, const pb::ListNodesRequest* req,
                                           pb::ListNodesResponse* resp) {
  HETPOOL_SERVE_OR_FORWARD(gate_, pb::ClusterService, ListNodes, ctx, req, resp);
  return Guarded(*guard_, ctx, "ListNodes", Action::kReadCluster, "", [&](const Caller&) {
    for (auto& node : state_->ListNodes()) *resp->add_nodes() = std::move(node);
    return absl::OkStatus();
  });
}

grpc::Status ClusterServiceImpl::GetNode(grpc::ServerContext* ctx, const pb::GetNodeRequest* req, pb::Node* resp) {
  HETPOOL_SERVE_OR_FORWARD(gate_, pb::ClusterService, GetNode, ctx, req, resp);
  return Guarded(*guard_, ctx, "GetNode", Action::kReadCluster, req->name(), [&](const Caller&) -> absl::Status {
    auto node = state_->GetNode(req->name());
    if (!node.ok()) return node.status();
    *resp = *std::move(node);
    return absl::OkStatus();
  });
}

grpc::Status ClusterServiceImpl::ListDevices(grpc::ServerContext* ctx, const pb::ListDevicesRequest* req,
                                             pb::ListDevicesResponse* resp) {
  HETPOOL_SERVE_OR_FORWARD(gate_, pb::ClusterService, ListDevices, ctx, req, resp);
  return Guarded(*guard_, ctx, "ListDevices", Action::kReadCluster, req->node(), [&](const Caller&) -> absl::Status {
    auto devices = state_->ListDevices(req->node(), req->vendor());
    if (!devices.ok()) return devices.status();
    for (auto& d : *devices) *resp->add_devices() = std::move(d);
    return absl::OkStatus();
  });
}

grpc::Status ClusterServiceImpl::SetDrained(grpc::ServerContext* ctx, const pb::DrainNodeRequest* req, pb::Node* resp,
                                            bool drained) {
  return Guarded(*guard_, ctx, drained ? "DrainNode" : "UndrainNode", Action::kDrainNode, req->name(),
                 [&](const Caller&) -> absl::Status {
                   auto node = state_->SetDrained(req->name(), drained);
                   if (!node.ok()) return node.status();
                   *resp = *std::move(node);
                   return absl::OkStatus();
                 });
}

grpc::Status ClusterServiceImpl::DrainNode(grpc::ServerContext* ctx, const pb::DrainNodeRequest* req, pb::Node* resp) {
  HETPOOL_SERVE_OR_FORWARD(gate_, pb::ClusterService, DrainNode, ctx, req, resp);
  return SetDrained(ctx, req, resp, true);
}

grpc::Status ClusterServiceImpl::UndrainNode(grpc::ServerContext* ctx, const pb::DrainNodeRequest* req,
                                             pb::Node* resp) {
  HETPOOL_SERVE_OR_FORWARD(gate_, pb::ClusterService, UndrainNode, ctx, req, resp);
  return SetDrained(ctx, req, resp, false);
}

grpc::Status ClusterServiceImpl::ReturnCard(grpc::ServerContext* ctx, const pb::ReturnCardRequest* req,
                                            pb::Node* resp) {
  HETPOOL_SERVE_OR_FORWARD(gate_, pb::ClusterService, ReturnCard, ctx, req, resp);
  // An operator's act on a node, audited as draining is.
  return Guarded(*guard_, ctx, "ReturnCard", Action::kDrainNode,
                 req->device_id().empty() ? req->node() : absl::StrCat(req->node(), "/", req->device_id()),
                 [&](const Caller&) -> absl::Status {
                   auto node = state_->ReturnCard(req->node(), req->device_id());
                   if (!node.ok()) return node.status();
                   *resp = *std::move(node);
                   return absl::OkStatus();
                 });
}

grpc::Status ClusterServiceImpl::ListFingerprints(grpc::ServerContext* ctx, const pb::ListFingerprintsRequest* req,
                                                  pb::ListFingerprintsResponse* resp) {
  HETPOOL_SERVE_OR_FORWARD(gate_, pb::ClusterService, ListFingerprints, ctx, req, resp);
  return Guarded(*guard_, ctx, "ListFingerprints", Action::kReadCluster, "", [&](const Caller&) {
    for (auto& c : state_->ListFingerprints()) *resp->add_classes() = std::move(c);
    return absl::OkStatus();
  });
}

grpc::Status ClusterServiceImpl::ListQueues(grpc::ServerContext* ctx, const pb::ListQueuesRequest* req,
                                            pb::ListQueuesResponse* resp) {
  HETPOOL_SERVE_OR_FORWARD(gate_, pb::ClusterService, ListQueues, ctx, req, resp);
  return Guarded(*guard_, ctx, "ListQueues", Action::kReadCluster, "", [&](const Caller&) {
    *resp = state_->ListQueues();
    return absl::OkStatus();
  });
}

}  // namespace hetpool::daemon
