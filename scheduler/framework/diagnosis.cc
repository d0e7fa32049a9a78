#include "scheduler/framework/diagnosis.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/framework/framework.h"

namespace hetpool::scheduler {

Diagnosis::Diagnosis(const PlacementRequest& request) { why_.needs = DescribeRequest(request); }

void Diagnosis::Restart() {
  never_reasons_.clear();
  capable_.clear();
  closest_ = -1;
  closest_node_.clear();
  why_.waiting_reasons.clear();
  why_.nodes_rejected.clear();
}

bool Diagnosis::NoteNever(const std::string& reason) {
  if (never_reasons_.size() >= kMaxDeviceReasons) return false;
  never_reasons_.insert(reason);
  return true;
}

void Diagnosis::NoteFitting(int fitting, const std::string& node) {
  if (fitting <= closest_) return;
  closest_ = fitting;
  closest_node_ = node;
}

void Diagnosis::Summarise(const PlacementRequest& request) {
  why_.device_reasons.assign(never_reasons_.begin(), never_reasons_.end());
  if (closest_ >= 0) {
    why_.closest = absl::StrCat("most ", request.Fractional() ? "devices with room" : "free qualifying devices",
                                " on one node: ", closest_, " (", closest_node_, ")");
  }
}

absl::Status Diagnosis::Fail(absl::Status status) {
  AttachPendingReason(status, why_);
  return status;
}

absl::Status Diagnosis::RefuseDevices(const PlacementRequest& request, const std::vector<NodeCandidate>& candidates,
                                      const std::set<std::string>& plain_use) {
  int most_capable = 0, most_ready = 0;
  for (const auto& [vendor, n] : capable_) most_capable = std::max(most_capable, n);
  std::map<Vendor, int> ready;
  for (const NodeCandidate& c : candidates) most_ready = std::max(most_ready, ++ready[c.vendor]);
  if (most_capable < request.nnodes) {
    why_.never = true;
    return Fail(absl::FailedPreconditionError(
        absl::StrCat("needs ", why_.needs, "; the pool has ", most_capable, " such node(s)",
                     never_reasons_.empty() ? "" : absl::StrCat(" (", absl::StrJoin(never_reasons_, "; "), ")"))));
  }
  // What held devices back besides plain use (quota, a reservation, a draining node...).
  std::vector<std::string> held_back;
  for (const auto& [plugin, reason] : why_.waiting_reasons) {
    if (!plain_use.contains(plugin)) held_back.push_back(reason);
  }
  return Fail(absl::UnavailableError(
      absl::StrCat("needs ", why_.needs, " free; ", most_ready, " node(s) have them free now",
                   held_back.empty() ? "" : absl::StrCat(" (", absl::StrJoin(held_back, "; "), ")"))));
}

absl::Status Diagnosis::RefuseCpu(const PlacementRequest& request, int capable_nodes, size_t ready_nodes,
                                  const std::set<std::string>& never_reasons,
                                  const std::set<std::string>& waiting_reasons) {
  why_.never = capable_nodes < request.nnodes;
  why_.closest = absl::StrCat(ready_nodes, " node(s) can take it now");
  if (why_.never) {
    why_.device_reasons.assign(never_reasons.begin(), never_reasons.end());
    return Fail(absl::FailedPreconditionError(
        absl::StrCat("needs ", request.nnodes, " nodes; the pool has ", capable_nodes, " that could hold it",
                     never_reasons.empty() ? "" : absl::StrCat(" (", absl::StrJoin(never_reasons, "; "), ")"))));
  }
  std::vector<std::string> turned_away;
  for (const auto& [plugin, n] : why_.nodes_rejected) turned_away.push_back(absl::StrCat(plugin, " ", n));
  why_.device_reasons.assign(waiting_reasons.begin(), waiting_reasons.end());
  return Fail(absl::UnavailableError(
      absl::StrCat("needs ", why_.needs, " free; ", ready_nodes, " node(s) can take it now; nodes turned away by ",
                   absl::StrJoin(turned_away, ", "),
                   waiting_reasons.empty() ? "" : absl::StrCat(" (", absl::StrJoin(waiting_reasons, "; "), ")"))));
}

absl::Status Diagnosis::RefuseBy(absl::string_view plugin, const absl::Status& said, bool count_node) {
  why_.never = absl::IsFailedPrecondition(said);
  if (count_node) {
    ++why_.nodes_rejected[std::string(plugin)];
  } else {
    why_.device_reasons.push_back(absl::StrCat(plugin, ": ", said.message()));
  }
  return Fail(absl::Status(said.code(), absl::StrCat(plugin, ": ", said.message())));
}

}  // namespace hetpool::scheduler
