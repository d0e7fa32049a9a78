#include "src/daemon/services/cluster_service.h"

#include "src/common/grpc_status.h"

namespace hetpool::daemon {

grpc::Status ClusterServiceImpl::ListNodes(grpc::ServerContext* ctx, const pb::ListNodesRequest* req,
                                           pb::ListNodesResponse* resp) {
  HETPOOL_SERVE_OR_FORWARD(gate_, pb::ClusterService, ListNodes, ctx, req, resp);
  for (auto& node : state_->ListNodes()) *resp->add_nodes() = std::move(node);
  return grpc::Status::OK;
}

grpc::Status ClusterServiceImpl::GetNode(grpc::ServerContext* ctx, const pb::GetNodeRequest* req,
                                         pb::Node* resp) {
  HETPOOL_SERVE_OR_FORWARD(gate_, pb::ClusterService, GetNode, ctx, req, resp);
  auto node = state_->GetNode(req->name());
  if (!node.ok()) return ToGrpcStatus(node.status());
  *resp = *std::move(node);
  return grpc::Status::OK;
}

grpc::Status ClusterServiceImpl::ListDevices(grpc::ServerContext* ctx, const pb::ListDevicesRequest* req,
                                             pb::ListDevicesResponse* resp) {
  HETPOOL_SERVE_OR_FORWARD(gate_, pb::ClusterService, ListDevices, ctx, req, resp);
  auto devices = state_->ListDevices(req->node(), req->vendor());
  if (!devices.ok()) return ToGrpcStatus(devices.status());
  for (auto& d : *devices) *resp->add_devices() = std::move(d);
  return grpc::Status::OK;
}

grpc::Status ClusterServiceImpl::DrainNode(grpc::ServerContext* ctx, const pb::DrainNodeRequest* req,
                                           pb::Node* resp) {
  HETPOOL_SERVE_OR_FORWARD(gate_, pb::ClusterService, DrainNode, ctx, req, resp);
  auto node = state_->SetDrained(req->name(), true);
  if (!node.ok()) return ToGrpcStatus(node.status());
  *resp = *std::move(node);
  return grpc::Status::OK;
}

grpc::Status ClusterServiceImpl::UndrainNode(grpc::ServerContext* ctx, const pb::DrainNodeRequest* req,
                                             pb::Node* resp) {
  HETPOOL_SERVE_OR_FORWARD(gate_, pb::ClusterService, UndrainNode, ctx, req, resp);
  auto node = state_->SetDrained(req->name(), false);
  if (!node.ok()) return ToGrpcStatus(node.status());
  *resp = *std::move(node);
  return grpc::Status::OK;
}

grpc::Status ClusterServiceImpl::ListFingerprints(grpc::ServerContext* ctx, const pb::ListFingerprintsRequest* req,
                                                  pb::ListFingerprintsResponse* resp) {
  HETPOOL_SERVE_OR_FORWARD(gate_, pb::ClusterService, ListFingerprints, ctx, req, resp);
  for (auto& c : state_->ListFingerprints()) *resp->add_classes() = std::move(c);
  return grpc::Status::OK;
}

}  // namespace hetpool::daemon
