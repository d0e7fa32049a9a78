#include "scheduler/framework/framework.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "drivers/fingerprint/spec_table.h"
#include "scheduler/link_score.h"

namespace hetpool::scheduler {
namespace {

constexpr size_t kMaxDeviceReasons = 3;

// A device's verdict from every device filter: the first that says never, the first that says
// not now. Every filter runs, so a transient "unhealthy" cannot hide a permanent "wrong ISA".
struct DeviceVerdict {
  const DeviceFilterPlugin* never = nullptr;
  const DeviceFilterPlugin* waiting = nullptr;
  std::string never_reason;
};

// Min-max onto 0..100; all equal -> 100, so a plugin with nothing to tell adds the same to all.
void MinMax(std::vector<int64_t>& scores) {
  if (scores.empty()) return;
  const auto [lo, hi] = std::minmax_element(scores.begin(), scores.end());
  const int64_t min = *lo, max = *hi;
  for (int64_t& s : scores) s = max == min ? 100 : (s - min) * 100 / (max - min);
}

Placement ToPlacement(const PlacementRequest& request, Vendor vendor, const std::vector<const NodeCandidate*>& group) {
  Placement p;
  p.vendor = vendor;
  for (const NodeCandidate* c : group) {
    NodeAssignment a{c->node->name, {}, c->link_score, request.Fractional() ? request.device_milli : 1000, 0};
    for (const DeviceView* dv : c->chosen) a.device_ids.push_back(dv->device->id);
    if (!c->chosen.empty()) a.device_memory_mib = MemoryHeld(request, *c->chosen.front()->device);
    p.nodes.push_back(std::move(a));
  }
  return p;
}

void SelectDevices(const PlacementRequest& request, NodeCandidate& c) {
  if (request.Fractional()) {
    // Best fit: the device with the least share left that still fits, so partly used devices
    // fill up and whole ones stay whole.
    const DeviceView* best = nullptr;
    for (const DeviceView* dv : c.fitting) {
      if (best == nullptr || dv->milli_free < best->milli_free ||
          (dv->milli_free == best->milli_free && dv->device->index < best->device->index)) {
        best = dv;
      }
    }
    c.chosen = {best};
    return;
  }
  std::vector<const DeviceRecord*> records;
  for (const DeviceView* dv : c.fitting) records.push_back(dv->device);
  const std::vector<const DeviceRecord*> picked = ChooseDevices(records, request.devices_per_node);
  for (const DeviceRecord* d : picked) {
    for (const DeviceView* dv : c.fitting) {
      if (dv->device == d) c.chosen.push_back(dv);
    }
  }
  c.link_score = LinkScore(picked);
}

// nnodes candidates of one vendor: the best-scored nodes of one rack when a rack can hold the
// job, otherwise the best-scored anywhere. Returns (racks spanned, score, members).
struct Group {
  int racks = 0;
  int64_t score = 0;
  std::vector<const NodeCandidate*> members;
};
std::optional<Group> AssembleGang(std::vector<const NodeCandidate*> ranked, const std::map<const NodeCandidate*, int64_t>& score,
                                  int nnodes) {
  if (static_cast<int>(ranked.size()) < nnodes) return std::nullopt;
  auto take = [&](const std::vector<const NodeCandidate*>& from) {
    Group g;
    std::set<std::string> racks;
    for (int i = 0; i < nnodes; ++i) {
      g.members.push_back(from[static_cast<size_t>(i)]);
      g.score += score.at(from[static_cast<size_t>(i)]);
      racks.insert(from[static_cast<size_t>(i)]->node->rack);
    }
    g.racks = static_cast<int>(racks.size());
    return g;
  };
  if (nnodes == 1) return take(ranked);
  std::map<std::string, std::vector<const NodeCandidate*>> by_rack;
  for (const NodeCandidate* c : ranked) by_rack[c->node->rack].push_back(c);
  std::optional<Group> best;
  for (const auto& [rack, members] : by_rack) {
    if (rack.empty() || static_cast<int>(members.size()) < nnodes) continue;
    Group g = take(members);
    if (!best || g.score > best->score) best = std::move(g);
  }
  if (best) return best;
  return take(ranked);
}

}  // namespace

void ScorePlugin::NormalizeScore(std::vector<int64_t>& scores) { MinMax(scores); }

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

absl::StatusOr<Placement> Framework::Place(const PlacementRequest& request, const std::vector<NodeView>& nodes) {
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

  if (request.devices_per_node == 0) {  // CPU job: nodes in name order
    std::vector<const NodeView*> order;
    for (const auto& n : nodes) order.push_back(&n);
    std::sort(order.begin(), order.end(), [](const NodeView* a, const NodeView* b) { return a->name < b->name; });
    Placement p;
    p.vendor = Vendor::kCpu;
    for (const NodeView* n : order) {
      if (auto v = node_verdict(*n)) {
        ++why.nodes_rejected[std::string(v->first->Name())];
        continue;
      }
      p.nodes.push_back({n->name, {}});
      if (static_cast<int>(p.nodes.size()) == request.nnodes) return p;
    }
    why.never = static_cast<int>(nodes.size()) < request.nnodes;
    why.closest = absl::StrCat(p.nodes.size(), " node(s) can take it now");
    if (why.never) {
      return fail(absl::FailedPreconditionError(absl::StrCat("needs ", request.nnodes, " nodes; the pool has ", nodes.size())));
    }
    return fail(absl::UnavailableError(
        absl::StrCat("needs ", request.nnodes, " schedulable nodes; ", p.nodes.size(), " are ready and not drained")));
  }

  const int need = request.Fractional() ? 1 : request.devices_per_node;
  std::vector<NodeCandidate> candidates;
  candidates.reserve(nodes.size());
  std::map<Vendor, int> capable;  // nodes that could ever hold the job's share, per vendor
  std::set<std::string> reasons;
  int closest = -1;
  std::string closest_node;
  for (const NodeView& node : nodes) {
    state.qualify.SetNode(node.context);
    std::map<Vendor, std::pair<std::vector<const DeviceView*>, int>> by_vendor;  // now-fitting, ever-count
    std::map<const DeviceFilterPlugin*, int> waiting_by, never_by;
    for (const DeviceView& dv : node.devices) {
      DeviceVerdict verdict;
      for (DeviceFilterPlugin* f : plugins_.device_filter) {
        auto v = f->FilterDevice(state, node, dv);
        if (!v) continue;
        if (v->rejection == Rejection::kNever && verdict.never == nullptr) {
          verdict.never = f;
          verdict.never_reason = v->reason;
        } else if (v->rejection == Rejection::kWaiting && verdict.waiting == nullptr) {
          verdict.waiting = f;
        }
      }
      if (verdict.never != nullptr) {
        ++never_by[verdict.never];
        if (reasons.size() < kMaxDeviceReasons) reasons.insert(verdict.never_reason);
        continue;
      }
      auto& [fitting, ever] = by_vendor[dv.device->vendor];
      ++ever;
      if (verdict.waiting == nullptr) {
        fitting.push_back(&dv);
      } else {
        ++waiting_by[verdict.waiting];
      }
    }
    bool any_capable = false, any_candidate = false;
    std::optional<std::pair<NodeFilterPlugin*, FilterVerdict>> rejected_node;
    for (auto& [vendor, entry] : by_vendor) {
      auto& [fitting, ever] = entry;
      if (ever < need) continue;
      rejected_node = node_verdict(node);
      if (rejected_node && rejected_node->second.rejection == Rejection::kNever) break;
      any_capable = true;
      ++capable[vendor];
      if (rejected_node) continue;
      if (static_cast<int>(fitting.size()) > closest) {
        closest = static_cast<int>(fitting.size());
        closest_node = node.name;
      }
      if (static_cast<int>(fitting.size()) < need) continue;
      NodeCandidate c;
      c.node = &node;
      c.vendor = vendor;
      c.fitting = std::move(fitting);
      SelectDevices(request, c);
      candidates.push_back(std::move(c));
      any_candidate = true;
    }
    if (any_candidate) continue;
    // Tally the node once, under the filter that turned it away.
    auto most = [](const std::map<const DeviceFilterPlugin*, int>& m) {
      return std::max_element(m.begin(), m.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    };
    if (rejected_node) {
      ++why.nodes_rejected[std::string(rejected_node->first->Name())];
    } else if (any_capable && !waiting_by.empty()) {
      ++why.nodes_rejected[std::string(most(waiting_by)->first->Name())];
    } else if (!never_by.empty()) {
      ++why.nodes_rejected[std::string(most(never_by)->first->Name())];
    } else {
      ++why.nodes_rejected["TooFewDevices"];
    }
  }

  // Score every candidate with every score plugin, normalise per plugin, add with weights.
  std::map<const NodeCandidate*, int64_t> total;
  for (const NodeCandidate& c : candidates) total[&c] = 0;
  for (const WeightedScore& ws : plugins_.score) {
    std::vector<int64_t> raw;
    raw.reserve(candidates.size());
    for (const NodeCandidate& c : candidates) raw.push_back(ws.plugin->Score(state, c));
    ws.plugin->NormalizeScore(raw);
    for (size_t i = 0; i < candidates.size(); ++i) total[&candidates[i]] += ws.weight * raw[i];
  }

  std::map<Vendor, std::vector<const NodeCandidate*>> ranked;
  for (const NodeCandidate& c : candidates) ranked[c.vendor].push_back(&c);
  std::optional<Group> best;
  Vendor best_vendor = Vendor::kCpu;
  for (auto& [vendor, list] : ranked) {
    std::stable_sort(list.begin(), list.end(), [&](const NodeCandidate* a, const NodeCandidate* b) {
      if (total[a] != total[b]) return total[a] > total[b];
      return a->node->name < b->node->name;
    });
    auto group = AssembleGang(list, total, request.nnodes);
    if (!group) continue;
    const bool better = !best || std::make_tuple(group->racks, -group->score) < std::make_tuple(best->racks, -best->score);
    if (better) {
      best = std::move(group);
      best_vendor = vendor;
    }
  }

  why.device_reasons.assign(reasons.begin(), reasons.end());
  if (closest >= 0) {
    why.closest = absl::StrCat("most ", request.Fractional() ? "devices with room" : "free qualifying devices",
                               " on one node: ", closest, " (", closest_node, ")");
  }
  if (!best) {
    int most_capable = 0, most_ready = 0;
    for (const auto& [vendor, n] : capable) most_capable = std::max(most_capable, n);
    for (const auto& [vendor, list] : ranked) most_ready = std::max(most_ready, static_cast<int>(list.size()));
    if (most_capable < request.nnodes) {
      why.never = true;
      return fail(absl::FailedPreconditionError(
          absl::StrCat("needs ", why.needs, "; the pool has ", most_capable, " such node(s)",
                       reasons.empty() ? "" : absl::StrCat(" (", absl::StrJoin(reasons, "; "), ")"))));
    }
    return fail(absl::UnavailableError(
        absl::StrCat("needs ", why.needs, " free; ", most_ready, " node(s) have them free now")));
  }
  Placement placement = ToPlacement(request, best_vendor, best->members);
  for (PermitPlugin* p : plugins_.permit) {
    absl::Status s = p->Permit(state, placement);
    if (!s.ok()) {
      why.never = absl::IsFailedPrecondition(s);
      ++why.nodes_rejected[std::string(p->Name())];
      return fail(absl::Status(s.code(), absl::StrCat(p->Name(), ": ", s.message())));
    }
  }
  return placement;
}

absl::StatusOr<Placement> Framework::Schedule(const PlacementRequest& request, const std::vector<NodeView>& nodes,
                                              Binder& binder) {
  auto placement = Place(request, nodes);
  if (!placement.ok()) return placement;
  for (ReservePlugin* r : plugins_.reserve) r->Reserve(request, *placement);
  if (absl::Status s = binder.Bind(*placement); !s.ok()) {
    for (auto it = plugins_.reserve.rbegin(); it != plugins_.reserve.rend(); ++it) (*it)->Unreserve(request, *placement);
    return s;
  }
  return placement;
}

}  // namespace hetpool::scheduler
