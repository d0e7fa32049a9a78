// One decision's filter pass over the nodes, for a job on devices: in view order, each node's
// device classes judged once by the device filters (Framework::VerdictFor), then the node filters,
// giving the candidates (per vendor, with their fitting devices) and, for a refusal, the
// Diagnosis. It stops once enough candidates are found (Kubernetes' numFeasibleNodesToFind) and one
// vendor alone can hold the gang. For framework.cc only: it reads the framework's summaries,
// verdicts and free-capacity index under its lock.
#pragma once

#include <array>
#include <span>
#include <vector>

#include "scheduler/framework/diagnosis.h"
#include "scheduler/framework/framework.h"

namespace hetpool::scheduler {

inline constexpr size_t kVendorCount = static_cast<size_t>(Vendor::kCpu) + 1;

class Framework::DeviceFilterPass {
 public:
  DeviceFilterPass(Framework& framework, CycleState& state, const std::vector<NodeView>& nodes, size_t find,
                   Diagnosis& diagnosis) ABSL_EXCLUSIVE_LOCKS_REQUIRED(framework.mu_);

  // One walk. `skip_unfit`: nodes the free-capacity index rules out are passed over unread; they
  // could never be candidates, so the candidates (and the placement) are the same as a full
  // walk's, but the tallies a refusal explains itself with are not.
  void Walk(bool skip_unfit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(framework_.mu_);
  std::vector<NodeCandidate>& candidates() { return candidates_; }

 private:
  // A node's devices by vendor: how many could ever hold the share, how many fit now, and per
  // device filter how many it rejected (to name the one that turned the node away).
  struct NodeTally {
    std::array<int, kVendorCount> ever{}, fitting{};
  };
  void Restart();
  void JudgeClasses(const NodeView& node, const NodeSummary& summary, NodeTally& tally)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(framework_.mu_);
  // The node as a candidate for each vendor it has enough fitting devices of; whether any.
  bool AddCandidates(const NodeView& node, const NodeSummary& summary, const NodeTally& tally, bool& any_capable,
                     std::optional<std::pair<NodeFilterPlugin*, FilterVerdict>>& rejected_node)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(framework_.mu_);
  // The node counted once, under the filter that turned it away.
  void TallyTurnedAway(bool any_capable,
                       const std::optional<std::pair<NodeFilterPlugin*, FilterVerdict>>& rejected_node);
  bool EnoughFound() const;
  // Tallies to the diagnosis, and each candidate's span of fitting devices.
  void Finish();

  Framework& framework_;
  CycleState& state_;
  const std::vector<NodeView>& nodes_;
  const PlacementRequest& request_;
  const size_t find_;
  const int need_;
  Diagnosis& diagnosis_;
  std::vector<NodeCandidate> candidates_;
  std::vector<const DeviceView*>& fitting_storage_;  // the framework's: allocating it showed in profiles
  std::vector<size_t> fitting_begin_;
  std::array<int, kVendorCount> candidates_by_vendor_{};
  std::vector<int> waiting_by_, never_by_;  // per node: devices each device filter rejected
  std::map<NodeFilterPlugin*, int> rejected_by_node_filter_;
  std::vector<int> rejected_by_device_filter_;  // slot 0: too few devices
};

}  // namespace hetpool::scheduler
