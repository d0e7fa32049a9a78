#include "scheduler/framework/framework.h"

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "drivers/fingerprint/spec_table.h"
#include "scheduler/link_score.h"
#include "scheduler/framework/filter_pass.h"
#include "scheduler/framework/role_groups.h"

namespace hetpool::scheduler {

std::string DescribeRequest(const PlacementRequest& request) {
  std::vector<std::string> wants;
  const auto& run = request.requirements.run;
  for (Precision p : run.precisions) wants.push_back(std::string(drivers::PrecisionName(p)));
  if (run.min_memory_mib > 0) wants.push_back(absl::StrCat(">= ", run.min_memory_mib / 1024, " GiB"));
  for (Vendor v : request.requirements.vendors) wants.push_back(std::string(VendorName(v)));
  if (!request.requirements.models.empty()) wants.push_back(absl::StrJoin(request.requirements.models, "|"));
  if (!request.requirements.fingerprints.empty())
    wants.push_back(absl::StrJoin(request.requirements.fingerprints, "|"));
  const std::string nodes = absl::StrCat(request.nnodes, request.nnodes == 1 ? " node" : " nodes");
  std::string out;
  if (request.devices_per_node == 0) return absl::StrCat(nodes, " (CPU)");
  if (request.Fractional()) {
    out = absl::StrCat(nodes, " x ", request.device_milli, "/1000 of a device");
  } else {
    out = absl::StrCat(nodes, " x ", request.devices_per_node, request.devices_per_node == 1 ? " device" : " devices",
                       " of one vendor");
  }
  if (!wants.empty()) absl::StrAppend(&out, " (", absl::StrJoin(wants, ", "), ")");
  return out;
}

Framework::Framework(Plugins plugins, size_t nodes_to_score, size_t nodes_to_find)
    : plugins_(std::move(plugins)), nodes_to_score_(nodes_to_score), nodes_to_find_(nodes_to_find) {
  for (const auto& plugin : plugins_.owned) {
    if (auto* aware = dynamic_cast<WorkloadAwarePlugin*>(plugin.get())) workload_aware_.push_back(aware);
  }
  // The index answers for a filter that says it judges what the index keeps (plugin.h).
  for (const DeviceFilterPlugin* f : plugins_.device_filter) {
    index_devices_ = index_devices_ || f->Judges(FilterJudges::kFreeDevices);
    if (f->Judges(FilterJudges::kPlainUse)) plain_use_filters_.insert(std::string(f->Name()));
  }
  for (const NodeFilterPlugin* f : plugins_.node_filter)
    index_host_ = index_host_ || f->Judges(FilterJudges::kFreeHost);
}

size_t Framework::AdaptiveNodesToFind(size_t nodes) {
  constexpr size_t kMinFeasible = 100;
  if (nodes <= kMinFeasible) return nodes;
  const size_t percent = std::max<int64_t>(5, 50 - static_cast<int64_t>(nodes / 125));
  return std::max(kMinFeasible, nodes * percent / 100);
}

const Framework::NodeSummary& Framework::Summarise(size_t index, const NodeView& node) {
  if (summaries_.size() <= index) summaries_.resize(index + 1);
  NodeSummary& s = summaries_[index];
  // Generations are unique across a pool's views (ContentGeneration hashes the name too).
  if (node.generation != 0 && s.generation == node.generation) return s;
  s.generation = node.generation;
  s.context = ContextOf(node.context);
  s.device_class.clear();
  s.classes.clear();
  s.pair_table.clear();
  s.busy_vendors = 0;
  s.index_ordered = true;
  for (size_t d = 0; d < node.devices.size(); ++d) {
    if (d > 0 && node.devices[d - 1].device->index >= node.devices[d].device->index) s.index_ordered = false;
    if (!node.devices[d].free)
      s.busy_vendors |= static_cast<uint8_t>(1u << static_cast<unsigned>(node.devices[d].device->vendor));
    const uint32_t id = ClassOf(node, node.devices[d]);
    s.device_class.push_back(id);
    auto it = std::find_if(s.classes.begin(), s.classes.end(), [id](const ClassCount& c) { return c.id == id; });
    if (it == s.classes.end()) {
      s.classes.push_back({id, 1, static_cast<uint16_t>(d)});
    } else {
      ++it->count;
    }
  }
  return s;
}

uint32_t Framework::ClassOf(const NodeView& node, const DeviceView& dv) {
  const DeviceRecord& d = *dv.device;
  DeviceClassKey key{d.fingerprint,
                     d.model,
                     d.healthy ? d.dirty : d.health_message,
                     d.fingerprint.empty() ? absl::StrCat(node.name, "/", d.id) : std::string(),
                     static_cast<int>(d.vendor),
                     d.Placeable(),
                     dv.free,
                     dv.held,
                     dv.milli_free,
                     d.memory_mib,
                     dv.memory_free_mib};
  auto [it, added] = class_ids_.emplace(std::move(key), static_cast<uint32_t>(class_vendor_.size()));
  if (added) class_vendor_.push_back(d.vendor);
  return it->second;
}

uint32_t Framework::ContextOf(const drivers::RunContext& context) {
  auto key = std::make_pair(context.metax_cuda_translation, context.torch_devices);
  auto it = context_ids_.find(key);
  if (it == context_ids_.end())
    it = context_ids_.emplace(std::move(key), static_cast<uint32_t>(context_ids_.size())).first;
  return it->second;
}

Framework::Verdict& Framework::VerdictFor(CycleState& state, const NodeView& node, const NodeSummary& summary,
                                          const ClassCount& c) {
  if (verdicts_.size() <= summary.context) verdicts_.resize(summary.context + 1);
  std::vector<Verdict>& row = verdicts_[summary.context];
  if (row.size() <= c.id) row.resize(class_vendor_.size());
  Verdict& v = row[c.id];
  if (v.decision == decision_) return v;
  // Reset in place: the strings and the list keep their storage from decision to decision.
  v.decision = decision_;
  v.never = v.waiting = -1;
  v.reason.clear();
  v.waiting_reasons.clear();
  v.reason_noted = false;
  state.qualify.SetNode(node.context);
  const DeviceView& representative = node.devices[c.first];
  for (size_t i = 0; i < plugins_.device_filter.size(); ++i) {
    auto verdict = plugins_.device_filter[i]->FilterDevice(state, node, representative);
    if (!verdict) continue;
    if (verdict->rejection == Rejection::kNever && v.never < 0) {
      v.never = static_cast<int>(i);
      v.reason = std::move(verdict->reason);
    } else if (verdict->rejection == Rejection::kWaiting) {
      if (v.waiting < 0) v.waiting = static_cast<int>(i);
      v.waiting_reasons.emplace_back(static_cast<int>(i), std::move(verdict->reason));
    }
  }
  return v;
}

const std::vector<int>& Framework::PairTable(size_t index, const NodeView& node) {
  NodeSummary& s = summaries_[index];  // Summarise made it
  if (s.pair_table.empty() && !node.devices.empty()) {
    std::vector<const DeviceRecord*> records;
    for (const DeviceView& dv : node.devices) records.push_back(dv.device);
    s.pair_table = PairScoreTable(records);
  }
  return s.pair_table;
}

bool Framework::QueueLess(const QueuedJob& a, const QueuedJob& b) const {
  return plugins_.queue_sort != nullptr ? plugins_.queue_sort->Less(a, b) : PlacementPolicy::QueueLess(a, b);
}

absl::StatusOr<Placement> Framework::Place(const PlacementRequest& request, const std::vector<NodeView>& nodes) {
  absl::MutexLock lock(&mu_);
  return DecideLocked(request, nodes);
}

absl::StatusOr<Placement> Framework::DecideLocked(const PlacementRequest& request, const std::vector<NodeView>& nodes) {
  if (request.Grouped()) {  // each group decided like a job of its own (and remembered as one)
    return PlaceRoleGroups(request, nodes, [this](const PlacementRequest& group, const std::vector<NodeView>& views) {
      mu_.AssertHeld();
      return DecideLocked(group, views);
    });
  }
  if (index_devices_) free_index_.Sync(nodes);
  // The views' key is a pass over every node (over the index's array of generations when there is
  // one), and the request's key a string: each is worked out only when needed, to look up a
  // refusal of the same request or to remember a new one. A pool with nothing refused pays neither.
  std::optional<uint64_t> views_key;
  auto key_of_views = [&] {
    if (!views_key) {
      views_key = index_devices_ ? RefusalMemo::ViewsKey(free_index_.generations()) : RefusalMemo::ViewsKey(nodes);
    }
    return *views_key;
  };
  std::string request_key;
  if (refusals_.size() > 0) {
    request_key = RefusalMemo::RequestKey(request);
    if (refusals_.Knows(request_key)) {
      if (auto refused = refusals_.Find(request_key, key_of_views())) return *refused;
    }
  }
  auto placement = PlaceLocked(request, nodes);
  if (!placement.ok()) {
    if (request_key.empty()) request_key = RefusalMemo::RequestKey(request);
    refusals_.Remember(request_key, key_of_views(), placement.status());
  }
  return placement;
}

std::optional<std::pair<NodeFilterPlugin*, FilterVerdict>> Framework::NodeVerdict(CycleState& state,
                                                                                  const NodeView& node) {
  for (NodeFilterPlugin* f : plugins_.node_filter) {
    if (auto v = f->FilterNode(state, node)) return std::make_pair(f, *v);
  }
  return std::nullopt;
}

absl::StatusOr<Placement> Framework::PlaceLocked(const PlacementRequest& request, const std::vector<NodeView>& nodes) {
  // The interned classes grow with every distinct free share seen; start over when they are many.
  constexpr size_t kMaxClasses = 1 << 20;
  if (class_vendor_.size() > kMaxClasses || context_ids_.size() > kMaxClasses) {
    class_ids_.clear();
    class_vendor_.clear();
    context_ids_.clear();
    summaries_.clear();
    verdicts_.clear();
  }
  ++decision_;
  CycleState state(request);
  Diagnosis diagnosis(request);
  for (PreFilterPlugin* p : plugins_.pre_filter) {
    if (absl::Status s = p->PreFilter(state); !s.ok()) return diagnosis.RefuseBy(p->Name(), s, /*count_node=*/false);
  }
  // Filtering stops once enough nodes can take the job (Kubernetes' numFeasibleNodesToFind), in
  // view order from the first node: early nodes fill first and later ones stay whole.
  const size_t find = std::max(nodes_to_find_ > 0 ? nodes_to_find_ : AdaptiveNodesToFind(nodes.size()),
                               static_cast<size_t>(request.nnodes) * 2);
  if (request.devices_per_node == 0) return PlaceCpuJob(state, nodes, find, diagnosis);

  DeviceFilterPass pass(*this, state, nodes, find, diagnosis);
  const bool use_index = index_devices_;  // DecideLocked brought it up to date with `nodes`
  pass.Walk(use_index);
  std::optional<Placement> placement = ScoreAndAssemble(state, nodes, pass.candidates());
  if (!placement && use_index) {
    // A refusal names what holds the job back on every node: walk them all (the candidates come
    // out the same, so the answer does too). Verdicts are judged afresh for the reasons they note.
    ++decision_;
    pass.Walk(false);
  }
  diagnosis.Summarise(request);
  if (!placement) return diagnosis.RefuseDevices(request, pass.candidates(), plain_use_filters_);
  return PermitOrFail(state, *placement, diagnosis);
}

absl::StatusOr<Placement> Framework::PlaceCpuJob(CycleState& state, const std::vector<NodeView>& nodes, size_t find,
                                                 Diagnosis& diagnosis) {
  const PlacementRequest& request = state.request;
  std::vector<NodeCandidate> candidates;
  int capable_nodes = 0;  // nodes no filter rules out for good (e.g. too few cores in all)
  std::set<std::string> never_reasons, waiting_reasons;
  for (const NodeView& n : nodes) {
    if (auto v = NodeVerdict(state, n)) {
      diagnosis.NoteRejected(v->first->Name(), 1);
      const bool never = v->second.rejection == Rejection::kNever;
      std::set<std::string>& reasons_of_kind = never ? never_reasons : waiting_reasons;
      if (reasons_of_kind.size() < kMaxDeviceReasons) reasons_of_kind.insert(v->second.reason);
      if (!never) diagnosis.NoteWaiting(v->first->Name(), v->second.reason);
      capable_nodes += never ? 0 : 1;
      continue;
    }
    ++capable_nodes;
    NodeCandidate c;
    c.node = &n;
    candidates.push_back(std::move(c));
    if (candidates.size() >= find) break;
  }
  if (static_cast<int>(candidates.size()) >= request.nnodes) {
    if (auto placement = ScoreAndAssemble(state, nodes, candidates)) return PermitOrFail(state, *placement, diagnosis);
  }
  return diagnosis.RefuseCpu(request, capable_nodes, candidates.size(), never_reasons, waiting_reasons);
}

absl::StatusOr<Placement> Framework::PermitOrFail(CycleState& state, Placement placement, Diagnosis& diagnosis) {
  for (PermitPlugin* p : plugins_.permit) {
    if (absl::Status s = p->Permit(state, placement); !s.ok())
      return diagnosis.RefuseBy(p->Name(), s, /*count_node=*/true);
  }
  for (NodeAssignment& node : placement.nodes) node.vendor = placement.vendor;
  return placement;
}

absl::StatusOr<Placement> Framework::Schedule(const PlacementRequest& request, const std::vector<NodeView>& nodes,
                                              Binder& binder) {
  absl::MutexLock lock(&mu_);
  auto placement = DecideLocked(request, nodes);
  if (!placement.ok()) return placement;
  for (ReservePlugin* r : plugins_.reserve) r->Reserve(request, *placement);
  if (absl::Status s = binder.Bind(*placement); !s.ok()) {
    for (auto it = plugins_.reserve.rbegin(); it != plugins_.reserve.rend(); ++it)
      (*it)->Unreserve(request, *placement);
    return s;
  }
  return placement;
}

void Framework::ExpectWorkload(const std::vector<WorkloadShape>& shapes) {
  absl::MutexLock lock(&mu_);
  for (WorkloadAwarePlugin* aware : workload_aware_) aware->ExpectWorkload(shapes);
}

void Framework::NoteSubmitted(const PlacementRequest& request) {
  absl::MutexLock lock(&mu_);
  for (WorkloadAwarePlugin* aware : workload_aware_) aware->NoteSubmitted(request);
}

}  // namespace hetpool::scheduler
