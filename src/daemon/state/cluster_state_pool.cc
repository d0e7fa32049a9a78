// ClusterState, the pool as operators read it: nodes, devices, fingerprint classes, what the
// planner sizes against, and the snapshot the metrics and the dashboard read; draining.
#include "src/daemon/state/cluster_state.h"

#include "absl/strings/str_cat.h"
#include "src/daemon/state/pool_queries.h"

namespace hetpool::daemon {

std::vector<pb::Node> ClusterState::ListNodes() const {
  absl::MutexLock lock(&mu_);
  std::vector<pb::Node> out;
  for (const auto& [name, node] : nodes_.entries()) out.push_back(NodeRegistry::Snapshot(node));
  return out;
}

absl::StatusOr<pb::Node> ClusterState::GetNode(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  const NodeEntry* node = nodes_.Find(name);
  if (node == nullptr) return absl::NotFoundError(absl::StrCat("node '", name, "' not found"));
  return NodeRegistry::Snapshot(*node);
}

absl::StatusOr<std::vector<pb::DeviceView>> ClusterState::ListDevices(const std::string& node_name,
                                                                      const std::string& vendor) const {
  if (!vendor.empty() && !ParseVendor(vendor)) {
    return absl::InvalidArgumentError(
        absl::StrCat("vendor: unknown vendor '", vendor, "' (known: ", kKnownVendorList, ")"));
  }
  absl::MutexLock lock(&mu_);
  if (!node_name.empty() && nodes_.Find(node_name) == nullptr) {
    return absl::NotFoundError(absl::StrCat("node '", node_name, "' not found"));
  }
  return DeviceViews(nodes_, node_name, vendor);
}

absl::StatusOr<pb::Node> ClusterState::SetDrained(const std::string& name, bool drained) {
  absl::MutexLock lock(&mu_);
  NodeEntry* node = nodes_.Find(name);
  if (node == nullptr) return absl::NotFoundError(absl::StrCat("node '", name, "' not found"));
  if (absl::Status s = nodes_.SetDrained(*node, drained, "by an operator"); !s.ok()) return s;
  return NodeRegistry::Snapshot(*node);
}

absl::StatusOr<pb::Node> ClusterState::ReturnCard(const std::string& node_name, const std::string& device_id) {
  absl::MutexLock lock(&mu_);
  NodeEntry* node = nodes_.Find(node_name);
  if (node == nullptr) return absl::NotFoundError(absl::StrCat("node '", node_name, "' not found"));
  // No device: the node itself (hetpoolctl return-node).
  if (absl::Status s = device_id.empty() ? nodes_.ReturnNode(*node) : nodes_.ReturnCard(*node, device_id); !s.ok()) {
    return s;
  }
  return NodeRegistry::Snapshot(*node);
}

std::vector<pb::FingerprintClass> ClusterState::ListFingerprints() const {
  absl::MutexLock lock(&mu_);
  return FingerprintClasses(nodes_);
}

std::vector<planner::PoolClass> ClusterState::PlannerPool() const {
  absl::MutexLock lock(&mu_);
  return daemon::PlannerPool(nodes_);
}

PoolSnapshot ClusterState::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return SnapshotOf(nodes_, jobs_, Now());
}

}  // namespace hetpool::daemon
