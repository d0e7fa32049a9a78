// What a decision found on its way, to explain a refusal (kube-scheduler's Diagnosis): the nodes
// each filter turned away, the reasons devices could never or not yet take the job, the node that
// came closest, how many nodes of each vendor could ever hold it. It builds the refusal's status
// with its PendingReason attached (pending_reason.h).
#pragma once

#include <array>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "scheduler/framework/pending_reason.h"
#include "scheduler/framework/plugin.h"

namespace hetpool::scheduler {

inline constexpr size_t kMaxDeviceReasons = 3;

class Diagnosis {
 public:
  explicit Diagnosis(const PlacementRequest& request);

  // Starts a device walk over (the tallies of a walk that is done again are the last walk's).
  void Restart();
  // A reason devices can never take the job (a few distinct ones are kept); false when not kept.
  bool NoteNever(const std::string& reason);
  // The first reason `plugin` made devices or nodes wait.
  void NoteWaiting(absl::string_view plugin, const std::string& reason) {
    why_.waiting_reasons.try_emplace(std::string(plugin), reason);
  }
  void NoteRejected(absl::string_view plugin, int nodes) { why_.nodes_rejected[std::string(plugin)] += nodes; }
  void NoteCapable(Vendor vendor) { ++capable_[vendor]; }
  // A node with `fitting` devices free that qualify: the closest so far if it has the most.
  void NoteFitting(int fitting, const std::string& node);

  // The refusals. A device job: "never" when fewer nodes of one vendor than it needs could ever
  // hold it, else waiting, naming what held devices back besides plain use (the waits of filters
  // in `plain_use`, whose waits mean the cards are busy, are not listed).
  absl::Status RefuseDevices(const PlacementRequest& request, const std::vector<NodeCandidate>& candidates,
                             const std::set<std::string>& plain_use);
  // A CPU job, from the nodes that could ever (capable) or now (ready) take it.
  absl::Status RefuseCpu(const PlacementRequest& request, int capable_nodes, size_t ready_nodes,
                         const std::set<std::string>& never_reasons, const std::set<std::string>& waiting_reasons);
  // A refusal by a plugin (PreFilter, Permit): never when it said FAILED_PRECONDITION.
  absl::Status RefuseBy(absl::string_view plugin, const absl::Status& said, bool count_node);
  // The closest node in words and the device reasons, for a refusal or a permit's.
  void Summarise(const PlacementRequest& request);

  PendingReason& why() { return why_; }

 private:
  absl::Status Fail(absl::Status status);
  PendingReason why_;
  std::set<std::string> never_reasons_;
  std::map<Vendor, int> capable_;  // nodes that could ever hold the job's share, per vendor
  int closest_ = -1;
  std::string closest_node_;
};

}  // namespace hetpool::scheduler
