// The daemon's placement policy: a pipeline of named plugins (plugin.h) built from a JSON
// profile (profile.h). One Place call:
//   PreFilter -> per node: device filters that can never pass (CanRun, vendor, class), node
//   filters, device filters that may pass later (health, free capacity) -> device selection
//   (best-linked set, or best-fit share) -> Score, NormalizeScore, weighted sum -> gang assembly
//   (nnodes candidates of one vendor, one rack preferred) -> Permit.
// Schedule() adds Reserve -> Bind (the daemon's Binder) -> Unreserve on failure.
// A job that cannot be placed gets a PendingReason (pending_reason.h) on the returned status.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "scheduler/framework/pending_reason.h"
#include "scheduler/framework/plugin.h"

namespace hetpool::scheduler {

struct WeightedScore {
  ScorePlugin* plugin = nullptr;
  int weight = 1;
};

class Framework : public PlacementPolicy {
 public:
  // Plugins in run order; `owned` keeps them alive (one object may serve several points).
  struct Plugins {
    std::vector<std::shared_ptr<Plugin>> owned;
    std::vector<PreFilterPlugin*> pre_filter;
    std::vector<DeviceFilterPlugin*> device_filter;
    std::vector<NodeFilterPlugin*> node_filter;
    std::vector<WeightedScore> score;
    std::vector<PermitPlugin*> permit;
    std::vector<ReservePlugin*> reserve;
  };
  // nodes_to_score: how many candidates per vendor, best by the plugins that need no device
  // choice, go on to device selection and the plugins that do (Kubernetes' percentageOfNodesToScore
  // plays the same role): what keeps a decision on 5,000 nodes cheap.
  explicit Framework(Plugins plugins, size_t nodes_to_score = kDefaultNodesToScore)
      : plugins_(std::move(plugins)), nodes_to_score_(nodes_to_score) {}
  static constexpr size_t kDefaultNodesToScore = 64;

  absl::StatusOr<Placement> Place(const PlacementRequest& request, const std::vector<NodeView>& nodes) override;
  // Place, then Reserve, Bind and (if binding fails) Unreserve.
  absl::StatusOr<Placement> Schedule(const PlacementRequest& request, const std::vector<NodeView>& nodes,
                                     Binder& binder) override;

 private:
  Plugins plugins_;
  size_t nodes_to_score_;
};

// "1 node x 8 devices of one vendor (bf16, >= 80 GiB)": a request's shape in words.
std::string DescribeRequest(const PlacementRequest& request);

}  // namespace hetpool::scheduler
