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
#include "scheduler/framework/role_groups.h"

namespace hetpool::scheduler {
namespace {

constexpr size_t kMaxDeviceReasons = 3;
constexpr size_t kVendorCount = static_cast<size_t>(Vendor::kCpu) + 1;

}  // namespace

std::string DescribeRequest(const PlacementRequest& request) {
  std::vector<std::string> wants;
  const auto& run = request.requirements.run;
  for (Precision p : run.precisions) wants.push_back(std::string(drivers::PrecisionName(p)));
  if (run.min_memory_mib > 0) wants.push_back(absl::StrCat(">= ", run.min_memory_mib / 1024, " GiB"));
  for (Vendor v : request.requirements.vendors) wants.push_back(std::string(VendorName(v)));
  if (!request.requirements.models.empty()) wants.push_back(absl::StrJoin(request.requirements.models, "|"));
  if (!request.requirements.fingerprints.empty()) wants.push_back(absl::StrJoin(request.requirements.fingerprints, "|"));
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
  for (const DeviceFilterPlugin* f : plugins_.device_filter) index_devices_ = index_devices_ || f->Name() == "Capacity";
  for (const NodeFilterPlugin* f : plugins_.node_filter) index_host_ = index_host_ || f->Name() == "HostResources";
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
    if (!node.devices[d].free) s.busy_vendors |= static_cast<uint8_t>(1u << static_cast<unsigned>(node.devices[d].device->vendor));
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
  DeviceClassKey key{d.fingerprint, d.model, d.healthy ? d.dirty : d.health_message,
                     d.fingerprint.empty() ? absl::StrCat(node.name, "/", d.id) : std::string(),
                     static_cast<int>(d.vendor), d.Placeable(), dv.free, dv.held, dv.milli_free, d.memory_mib, dv.memory_free_mib};
  auto [it, added] = class_ids_.emplace(std::move(key), static_cast<uint32_t>(class_vendor_.size()));
  if (added) class_vendor_.push_back(d.vendor);
  return it->second;
}

uint32_t Framework::ContextOf(const drivers::RunContext& context) {
  auto key = std::make_pair(context.metax_cuda_translation, context.torch_devices);
  auto it = context_ids_.find(key);
  if (it == context_ids_.end()) it = context_ids_.emplace(std::move(key), static_cast<uint32_t>(context_ids_.size())).first;
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
  PendingReason why;
  why.needs = DescribeRequest(request);
  auto fail = [&](absl::Status status) {
    AttachPendingReason(status, why);
    return status;
  };
  for (PreFilterPlugin* p : plugins_.pre_filter) {
    absl::Status s = p->PreFilter(state);
    if (!s.ok()) {
      why.never = absl::IsFailedPrecondition(s);
      why.device_reasons.push_back(absl::StrCat(p->Name(), ": ", s.message()));
      return fail(absl::Status(s.code(), absl::StrCat(p->Name(), ": ", s.message())));
    }
  }
  auto node_verdict = [&](const NodeView& node) -> std::optional<std::pair<NodeFilterPlugin*, FilterVerdict>> {
    for (NodeFilterPlugin* f : plugins_.node_filter) {
      if (auto v = f->FilterNode(state, node)) return std::make_pair(f, *v);
    }
    return std::nullopt;
  };

  // Filtering stops once enough nodes can take the job (Kubernetes' numFeasibleNodesToFind), in
  // view order from the first node: early nodes fill first and later ones stay whole.
  const size_t find = std::max(nodes_to_find_ > 0 ? nodes_to_find_ : AdaptiveNodesToFind(nodes.size()),
                               static_cast<size_t>(request.nnodes) * 2);
  std::vector<NodeCandidate> candidates;
  if (request.devices_per_node == 0) {  // CPU job: every node that passes the node filters
    int capable_nodes = 0;  // nodes no filter rules out for good (e.g. too few cores in all)
    std::set<std::string> never_reasons, waiting_reasons;
    for (const NodeView& n : nodes) {
      if (auto v = node_verdict(n)) {
        ++why.nodes_rejected[std::string(v->first->Name())];
        const bool never = v->second.rejection == Rejection::kNever;
        std::set<std::string>& reasons_of_kind = never ? never_reasons : waiting_reasons;
        if (reasons_of_kind.size() < kMaxDeviceReasons) reasons_of_kind.insert(v->second.reason);
        if (!never) why.waiting_reasons.try_emplace(std::string(v->first->Name()), v->second.reason);
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
      if (auto placement = ScoreAndAssemble(state, nodes, candidates)) return PermitOrFail(state, *placement, why);
    }
    why.never = capable_nodes < request.nnodes;
    why.closest = absl::StrCat(candidates.size(), " node(s) can take it now");
    if (why.never) {
      why.device_reasons.assign(never_reasons.begin(), never_reasons.end());
      return fail(absl::FailedPreconditionError(absl::StrCat(
          "needs ", request.nnodes, " nodes; the pool has ", capable_nodes, " that could hold it",
          never_reasons.empty() ? "" : absl::StrCat(" (", absl::StrJoin(never_reasons, "; "), ")"))));
    }
    std::vector<std::string> turned_away;
    for (const auto& [plugin, n] : why.nodes_rejected) turned_away.push_back(absl::StrCat(plugin, " ", n));
    why.device_reasons.assign(waiting_reasons.begin(), waiting_reasons.end());
    return fail(absl::UnavailableError(absl::StrCat(
        "needs ", why.needs, " free; ", candidates.size(), " node(s) can take it now; nodes turned away by ",
        absl::StrJoin(turned_away, ", "),
        waiting_reasons.empty() ? "" : absl::StrCat(" (", absl::StrJoin(waiting_reasons, "; "), ")"))));
  }

  const int need = request.Fractional() ? 1 : request.devices_per_node;
  candidates.reserve(std::min(nodes.size(), find + kVendorCount));
  // The candidates' fitting devices, one after another (each candidate's span is set once the
  // walk is over and the storage no longer grows).
  std::vector<const DeviceView*>& fitting_storage = fitting_storage_;  // kept: allocating it showed in profiles
  std::vector<size_t> fitting_begin;
  std::array<int, kVendorCount> candidates_by_vendor{};
  std::map<Vendor, int> capable;  // nodes that could ever hold the job's share, per vendor
  std::set<std::string> reasons;
  int closest = -1;
  std::string closest_node;
  const size_t n_filters = plugins_.device_filter.size();
  std::vector<int> waiting_by(n_filters), never_by(n_filters);  // per node: devices each filter rejected
  std::map<NodeFilterPlugin*, int> rejected_by_node_filter;
  std::vector<int> rejected_by_device_filter(n_filters + 1);
  // One walk over the nodes in view order. `skip_unfit`: nodes the free-capacity index rules out
  // are passed over unread; they could never be candidates, so the candidates (and the placement)
  // are the same as a full walk's, but the tallies a refusal explains itself with are not.
  auto walk = [&](bool skip_unfit) {
    candidates.clear();
    fitting_storage.clear();
    fitting_begin.clear();
    candidates_by_vendor.fill(0);
    capable.clear();
    reasons.clear();
    closest = -1;
    closest_node.clear();
    rejected_by_node_filter.clear();
    std::fill(rejected_by_device_filter.begin(), rejected_by_device_filter.end(), 0);
    why.waiting_reasons.clear();
    why.nodes_rejected.clear();
    // Over the nodes whose bits say they may hold the ask, in view order (every node otherwise).
    auto next = [&](size_t from) { return skip_unfit ? free_index_.NextMayHold(from, request) : from; };
    for (size_t ni = next(0); ni < nodes.size(); ni = next(ni + 1)) {
      if (skip_unfit && !free_index_.MayHold(ni, request, index_host_)) continue;
      const NodeView& node = nodes[ni];
      const NodeSummary& summary = Summarise(ni, node);
      // Device filters run once per device class of the decision, not once per device.
      std::array<int, kVendorCount> ever{}, fitting{};
      std::fill(waiting_by.begin(), waiting_by.end(), 0);
      std::fill(never_by.begin(), never_by.end(), 0);
      for (const ClassCount& c : summary.classes) {
        Verdict& v = VerdictFor(state, node, summary, c);
        if (v.never >= 0) {
          never_by[static_cast<size_t>(v.never)] += c.count;
          if (!v.reason_noted && reasons.size() < kMaxDeviceReasons) reasons.insert(v.reason);
          v.reason_noted = true;
          continue;
        }
        const size_t vendor = static_cast<size_t>(class_vendor_[c.id]);
        ever[vendor] += c.count;
        if (v.waiting >= 0) {
          waiting_by[static_cast<size_t>(v.waiting)] += c.count;
          for (const auto& [filter, reason] : v.waiting_reasons) {
            why.waiting_reasons.try_emplace(std::string(plugins_.device_filter[static_cast<size_t>(filter)]->Name()), reason);
          }
        } else {
          fitting[vendor] += c.count;
        }
      }
      bool any_capable = false, any_candidate = false;
      std::optional<std::pair<NodeFilterPlugin*, FilterVerdict>> rejected_node;
      for (size_t vi = 0; vi < kVendorCount; ++vi) {
        if (ever[vi] < need) continue;
        rejected_node = node_verdict(node);
        if (rejected_node && rejected_node->second.rejection == Rejection::kNever) break;
        any_capable = true;
        ++capable[static_cast<Vendor>(vi)];
        if (rejected_node) {
          why.waiting_reasons.try_emplace(std::string(rejected_node->first->Name()), rejected_node->second.reason);
          continue;
        }
        if (fitting[vi] > closest) {
          closest = fitting[vi];
          closest_node = node.name;
        }
        if (fitting[vi] < need) continue;
        NodeCandidate c;
        c.node = &node;
        c.vendor = static_cast<Vendor>(vi);
        c.vendor_in_use = static_cast<int8_t>((summary.busy_vendors >> vi) & 1u);
        const size_t begin = fitting_storage.size();
        for (size_t d = 0; d < node.devices.size(); ++d) {
          const uint32_t cls = summary.device_class[d];
          const Verdict& v = verdicts_[summary.context][cls];
          if (static_cast<size_t>(class_vendor_[cls]) == vi && v.never < 0 && v.waiting < 0) {
            fitting_storage.push_back(&node.devices[d]);
          }
        }
        fitting_begin.push_back(begin);
        candidates.push_back(std::move(c));
        ++candidates_by_vendor[vi];
        any_candidate = true;
      }
      if (any_candidate) {
        // Enough found, and one vendor alone can hold the whole gang: stop looking.
        if (candidates.size() >= find &&
            *std::max_element(candidates_by_vendor.begin(), candidates_by_vendor.end()) >= request.nnodes) {
          break;
        }
        continue;
      }
      // Tally the node once, under the filter that turned it away (by plugin; named at the end).
      auto most = [](const std::vector<int>& counts) {
        const auto it = std::max_element(counts.begin(), counts.end());
        return it != counts.end() && *it > 0 ? static_cast<int>(it - counts.begin()) : -1;
      };
      if (rejected_node) {
        ++rejected_by_node_filter[rejected_node->first];
      } else {
        const int filter = any_capable ? most(waiting_by) : most(never_by);
        ++rejected_by_device_filter[static_cast<size_t>(filter + 1)];  // slot 0: too few devices
      }
    }
    for (const auto& [plugin, n] : rejected_by_node_filter) why.nodes_rejected[std::string(plugin->Name())] += n;
    for (size_t i = 0; i < rejected_by_device_filter.size(); ++i) {
      if (rejected_by_device_filter[i] == 0) continue;
      const std::string by = i == 0 ? "TooFewDevices" : std::string(plugins_.device_filter[i - 1]->Name());
      why.nodes_rejected[by] += rejected_by_device_filter[i];
    }
    fitting_begin.push_back(fitting_storage.size());
    for (size_t i = 0; i < candidates.size(); ++i) {
      candidates[i].fitting = std::span<const DeviceView* const>(fitting_storage.data() + fitting_begin[i],
                                                                 fitting_begin[i + 1] - fitting_begin[i]);
    }
  };
  const bool use_index = index_devices_;  // DecideLocked brought it up to date with `nodes`
  walk(use_index);
  std::optional<Placement> placement = ScoreAndAssemble(state, nodes, candidates);
  if (!placement && use_index) {
    // A refusal names what holds the job back on every node: walk them all (the candidates come
    // out the same, so the answer does too). Verdicts are judged afresh for the reasons they note.
    ++decision_;
    walk(false);
  }

  why.device_reasons.assign(reasons.begin(), reasons.end());
  if (closest >= 0) {
    why.closest = absl::StrCat("most ", request.Fractional() ? "devices with room" : "free qualifying devices",
                               " on one node: ", closest, " (", closest_node, ")");
  }
  if (!placement) {
    int most_capable = 0, most_ready = 0;
    for (const auto& [vendor, n] : capable) most_capable = std::max(most_capable, n);
    std::map<Vendor, int> ready;
    for (const NodeCandidate& c : candidates) most_ready = std::max(most_ready, ++ready[c.vendor]);
    if (most_capable < request.nnodes) {
      why.never = true;
      return fail(absl::FailedPreconditionError(
          absl::StrCat("needs ", why.needs, "; the pool has ", most_capable, " such node(s)",
                       reasons.empty() ? "" : absl::StrCat(" (", absl::StrJoin(reasons, "; "), ")"))));
    }
    // What held devices back besides plain use (quota, a reservation, a draining node...).
    std::vector<std::string> held_back;
    for (const auto& [plugin, reason] : why.waiting_reasons) {
      if (plugin != "Capacity") held_back.push_back(reason);
    }
    return fail(absl::UnavailableError(absl::StrCat("needs ", why.needs, " free; ", most_ready,
                                                    " node(s) have them free now",
                                                    held_back.empty() ? "" : absl::StrCat(" (", absl::StrJoin(held_back, "; "), ")"))));
  }
  return PermitOrFail(state, *placement, why);
}

absl::StatusOr<Placement> Framework::PermitOrFail(CycleState& state, Placement placement, PendingReason& why) {
  for (PermitPlugin* p : plugins_.permit) {
    absl::Status s = p->Permit(state, placement);
    if (!s.ok()) {
      why.never = absl::IsFailedPrecondition(s);
      ++why.nodes_rejected[std::string(p->Name())];
      s = absl::Status(s.code(), absl::StrCat(p->Name(), ": ", s.message()));
      AttachPendingReason(s, why);
      return s;
    }
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
    for (auto it = plugins_.reserve.rbegin(); it != plugins_.reserve.rend(); ++it) (*it)->Unreserve(request, *placement);
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
