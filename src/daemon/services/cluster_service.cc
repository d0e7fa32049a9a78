#include "src/daemon/services/cluster_service.h"

#include "src/common/grpc_status.h"

namespace hetpool::daemon {

grpc::Status ClusterServiceImpl::ListNodes(grpc::ServerContext*, const pb::ListNodesRequest*,
                                           pb::ListNodesResponse* resp) {
  HETPOOL_RETURN_IF_NOT_LEADER(gate_);
  for (auto& node : state_->ListNodes()) *resp->add_nodes() = std::move(node);
  return grpc::Status::OK;
}

grpc::Status ClusterServiceImpl::GetNode(grpc::ServerContext*, const pb::GetNodeRequest* req,
                                         pb::Node* resp) {
  HETPOOL_RETURN_IF_NOT_LEADER(gate_);
  auto node = state_->GetNode(req->name());
  if (!node.ok()) return ToGrpcStatus(node.status());
  *resp = *std::move(node);
  return grpc::Status::OK;
}

grpc::Status ClusterServiceImpl::ListDevices(grpc::ServerContext*, const pb::ListDevicesRequest* req,
                                             pb::ListDevicesResponse* resp) {
  HETPOOL_RETURN_IF_NOT_LEADER(gate_);
  auto devices = state_->ListDevices(req->node(), req->vendor());
  if (!devices.ok()) return ToGrpcStatus(devices.status());
  for (auto& d : *devices) *resp->add_devices() = std::move(d);
  return grpc::Status::OK;
}

grpc::Status ClusterServiceImpl::DrainNode(grpc::ServerContext*, const pb::DrainNodeRequest* req,
                                           pb::Node* resp) {
  HETPOOL_RETURN_IF_NOT_LEADER(gate_);
  auto node = state_->SetDrained(req->name(), true);
  if (!node.ok()) return ToGrpcStatus(node.status());
  *resp = *std::move(node);
  return grpc::Status::OK;
}

grpc::Status ClusterServiceImpl::UndrainNode(grpc::ServerContext*, const pb::DrainNodeRequest* req,
                                             pb::Node* resp) {
  HETPOOL_RETURN_IF_NOT_LEADER(gate_);
  auto node = state_->SetDrained(req->name(), false);
  if (!node.ok()) return ToGrpcStatus(node.status());
  *resp = *std::move(node);
  return grpc::Status::OK;
}

grpc::Status ClusterServiceImpl::ListFingerprints(grpc::ServerContext*, const pb::ListFingerprintsRequest*,
                                                  pb::ListFingerprintsResponse* resp) {
  HETPOOL_RETURN_IF_NOT_LEADER(gate_);
  for (auto& c : state_->ListFingerprints()) *resp->add_classes() = std::move(c);
  return grpc::Status::OK;
}

}  // namespace hetpool::daemon
