#include "scheduler/framework/filter_pass.h"

#include <algorithm>

namespace hetpool::scheduler {

Framework::DeviceFilterPass::DeviceFilterPass(Framework& framework, CycleState& state,
                                              const std::vector<NodeView>& nodes, size_t find, Diagnosis& diagnosis)
    : framework_(framework),
      state_(state),
      nodes_(nodes),
      request_(state.request),
      find_(find),
      need_(state.request.Fractional() ? 1 : state.request.devices_per_node),
      diagnosis_(diagnosis),
      fitting_storage_(framework.fitting_storage_),
      waiting_by_(framework.plugins_.device_filter.size()),
      never_by_(framework.plugins_.device_filter.size()),
      rejected_by_device_filter_(framework.plugins_.device_filter.size() + 1) {
  candidates_.reserve(std::min(nodes.size(), find + kVendorCount));
}

void Framework::DeviceFilterPass::Restart() {
  candidates_.clear();
  fitting_storage_.clear();
  fitting_begin_.clear();
  candidates_by_vendor_.fill(0);
  rejected_by_node_filter_.clear();
  std::fill(rejected_by_device_filter_.begin(), rejected_by_device_filter_.end(), 0);
  diagnosis_.Restart();
}

void Framework::DeviceFilterPass::JudgeClasses(const NodeView& node, const NodeSummary& summary, NodeTally& tally) {
  std::fill(waiting_by_.begin(), waiting_by_.end(), 0);
  std::fill(never_by_.begin(), never_by_.end(), 0);
  // Device filters run once per device class of the decision, not once per device.
  for (const ClassCount& c : summary.classes) {
    Verdict& v = framework_.VerdictFor(state_, node, summary, c);
    if (v.never >= 0) {
      never_by_[static_cast<size_t>(v.never)] += c.count;
      if (!v.reason_noted) diagnosis_.NoteNever(v.reason);
      v.reason_noted = true;
      continue;
    }
    const size_t vendor = static_cast<size_t>(framework_.class_vendor_[c.id]);
    tally.ever[vendor] += c.count;
    if (v.waiting >= 0) {
      waiting_by_[static_cast<size_t>(v.waiting)] += c.count;
      for (const auto& [filter, reason] : v.waiting_reasons) {
        diagnosis_.NoteWaiting(framework_.plugins_.device_filter[static_cast<size_t>(filter)]->Name(), reason);
      }
    } else {
      tally.fitting[vendor] += c.count;
    }
  }
}

bool Framework::DeviceFilterPass::AddCandidates(
    const NodeView& node, const NodeSummary& summary, const NodeTally& tally, bool& any_capable,
    std::optional<std::pair<NodeFilterPlugin*, FilterVerdict>>& rejected_node) {
  bool any_candidate = false;
  for (size_t vi = 0; vi < kVendorCount; ++vi) {
    if (tally.ever[vi] < need_) continue;
    rejected_node = framework_.NodeVerdict(state_, node);
    if (rejected_node && rejected_node->second.rejection == Rejection::kNever) break;
    any_capable = true;
    diagnosis_.NoteCapable(static_cast<Vendor>(vi));
    if (rejected_node) {
      diagnosis_.NoteWaiting(rejected_node->first->Name(), rejected_node->second.reason);
      continue;
    }
    diagnosis_.NoteFitting(tally.fitting[vi], node.name);
    if (tally.fitting[vi] < need_) continue;
    NodeCandidate c;
    c.node = &node;
    c.vendor = static_cast<Vendor>(vi);
    c.vendor_in_use = static_cast<int8_t>((summary.busy_vendors >> vi) & 1u);
    fitting_begin_.push_back(fitting_storage_.size());
    for (size_t d = 0; d < node.devices.size(); ++d) {
      const uint32_t cls = summary.device_class[d];
      const Verdict& v = framework_.verdicts_[summary.context][cls];
      if (static_cast<size_t>(framework_.class_vendor_[cls]) == vi && v.never < 0 && v.waiting < 0) {
        fitting_storage_.push_back(&node.devices[d]);
      }
    }
    candidates_.push_back(std::move(c));
    ++candidates_by_vendor_[vi];
    any_candidate = true;
  }
  return any_candidate;
}

void Framework::DeviceFilterPass::TallyTurnedAway(
    bool any_capable, const std::optional<std::pair<NodeFilterPlugin*, FilterVerdict>>& rejected_node) {
  auto most = [](const std::vector<int>& counts) {
    const auto it = std::max_element(counts.begin(), counts.end());
    return it != counts.end() && *it > 0 ? static_cast<int>(it - counts.begin()) : -1;
  };
  if (rejected_node) {
    ++rejected_by_node_filter_[rejected_node->first];
    return;
  }
  const int filter = any_capable ? most(waiting_by_) : most(never_by_);
  ++rejected_by_device_filter_[static_cast<size_t>(filter + 1)];
}

bool Framework::DeviceFilterPass::EnoughFound() const {
  return candidates_.size() >= find_ &&
         *std::max_element(candidates_by_vendor_.begin(), candidates_by_vendor_.end()) >= request_.nnodes;
}

void Framework::DeviceFilterPass::Walk(bool skip_unfit) {
  Restart();
  FreeCapacityIndex& index = framework_.free_index_;
  // Over the nodes whose bits say they may hold the ask, in view order (every node otherwise).
  auto next = [&](size_t from) { return skip_unfit ? index.NextMayHold(from, request_) : from; };
  for (size_t ni = next(0); ni < nodes_.size(); ni = next(ni + 1)) {
    if (skip_unfit && !index.MayHold(ni, request_, framework_.index_host_)) continue;
    const NodeView& node = nodes_[ni];
    const NodeSummary& summary = framework_.Summarise(ni, node);
    NodeTally tally;
    JudgeClasses(node, summary, tally);
    bool any_capable = false;
    std::optional<std::pair<NodeFilterPlugin*, FilterVerdict>> rejected_node;
    if (AddCandidates(node, summary, tally, any_capable, rejected_node)) {
      if (EnoughFound()) break;  // and one vendor alone can hold the whole gang: stop looking
      continue;
    }
    TallyTurnedAway(any_capable, rejected_node);
  }
  Finish();
}

void Framework::DeviceFilterPass::Finish() {
  for (const auto& [plugin, n] : rejected_by_node_filter_) diagnosis_.NoteRejected(plugin->Name(), n);
  for (size_t i = 0; i < rejected_by_device_filter_.size(); ++i) {
    if (rejected_by_device_filter_[i] == 0) continue;
    diagnosis_.NoteRejected(i == 0 ? "TooFewDevices" : framework_.plugins_.device_filter[i - 1]->Name(),
                            rejected_by_device_filter_[i]);
  }
  fitting_begin_.push_back(fitting_storage_.size());
  for (size_t i = 0; i < candidates_.size(); ++i) {
    candidates_[i].fitting = std::span<const DeviceView* const>(fitting_storage_.data() + fitting_begin_[i],
                                                                fitting_begin_[i + 1] - fitting_begin_[i]);
  }
}

}  // namespace hetpool::scheduler
