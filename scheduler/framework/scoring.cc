// The framework's second half: score the candidates the filters let through, choose devices on
// the best of them, and assemble the job's nodes (framework.h describes the whole pipeline).
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <tuple>

#include "scheduler/framework/framework.h"
#include "scheduler/link_score.h"

namespace hetpool::scheduler {
namespace {

const std::vector<int> kNoTable;

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

// The fitting devices without the degraded ones, when `needed` of them remain: a degraded card
// (device.h) is chosen last on its node, as the HealthyCards score places it last across nodes.
// `storage` holds them when some are left out; with none degraded (the common case) nothing is
// copied.
std::span<const DeviceView* const> WellFirst(std::span<const DeviceView* const> fitting, size_t needed,
                                             std::vector<const DeviceView*>& storage) {
  const size_t degraded = static_cast<size_t>(
      std::count_if(fitting.begin(), fitting.end(), [](const DeviceView* dv) { return dv->device->Degraded(); }));
  if (degraded == 0 || fitting.size() - degraded < needed) return fitting;
  storage.clear();
  for (const DeviceView* dv : fitting) {
    if (!dv->device->Degraded()) storage.push_back(dv);
  }
  return storage;
}

// `pair_table`: the link scores of the node's device pairs, by position in its view.
// `index_ordered`: the view lists the devices by index, so the fitting ones (in view order) are too.
void SelectDevices(const PlacementRequest& request, NodeCandidate& c, const std::vector<int>& pair_table,
                   bool index_ordered) {
  std::vector<const DeviceView*> well;
  const std::span<const DeviceView* const> fitting =
      WellFirst(c.fitting, request.Fractional() ? 1 : static_cast<size_t>(request.devices_per_node), well);
  if (request.Fractional()) {
    // Best fit: the device with the least share left that still fits, so partly used devices
    // fill up and whole ones stay whole.
    const DeviceView* best = nullptr;
    for (const DeviceView* dv : fitting) {
      if (best == nullptr || dv->milli_free < best->milli_free ||
          (dv->milli_free == best->milli_free && dv->device->index < best->device->index)) {
        best = dv;
      }
    }
    c.chosen = {best};
    return;
  }
  const std::vector<DeviceView>& devices = c.node->devices;
  std::vector<size_t> free;
  free.reserve(fitting.size());
  for (const DeviceView* dv : fitting) free.push_back(static_cast<size_t>(dv - devices.data()));
  if (!index_ordered) {  // each comparison reads two device records: skipped when it can be
    std::sort(free.begin(), free.end(),
              [&](size_t a, size_t b) { return devices[a].device->index < devices[b].device->index; });
  }
  const std::vector<size_t> picked = ChooseFromTable(pair_table, devices.size(), free, request.devices_per_node);
  for (size_t p : picked) c.chosen.push_back(&devices[p]);
  c.link_score = LinkScoreFromTable(pair_table, devices.size(), picked);
}

// A share can go on any device with room. The plugins that read the device choice score each
// distinct amount left (the device of lowest index holding it stands for the others) and the
// best weighted sum of their raw scores wins; ties keep the lowest index, as the FGD paper's
// simulator does (best-fit ties measured 0.04 points lower on the trace). `raw` receives the
// winner's scores, one per plugin of `selecting`.
void ChooseShare(CycleState& state, NodeCandidate& c, const std::vector<const WeightedScore*>& selecting,
                 std::vector<int64_t>& raw) {
  std::vector<const DeviceView*> well;
  const std::span<const DeviceView* const> preferred = WellFirst(c.fitting, 1, well);
  std::vector<const DeviceView*> options(preferred.begin(), preferred.end());
  std::sort(options.begin(), options.end(),
            [](const DeviceView* a, const DeviceView* b) { return a->device->index < b->device->index; });
  std::set<int32_t> seen;
  std::optional<int64_t> best_sum;
  const DeviceView* best = nullptr;
  std::vector<int64_t> scores(selecting.size());
  for (const DeviceView* dv : options) {
    if (!seen.insert(dv->milli_free).second) continue;
    c.chosen = {dv};
    int64_t sum = 0;
    for (size_t j = 0; j < selecting.size(); ++j) {
      scores[j] = selecting[j]->plugin->Score(state, c);
      sum += selecting[j]->weight * scores[j];
    }
    if (!best_sum || sum > *best_sum) {
      best_sum = sum;
      best = dv;
      raw = scores;
    }
  }
  c.chosen = {best};
}

// nnodes candidates of one vendor: the best-scored nodes of one rack when a rack can hold the
// job, otherwise the best-scored anywhere.
struct Group {
  int racks = 0;
  int64_t score = 0;
  std::vector<const NodeCandidate*> members;
};
// `score`: each candidate's total, by its position from `first`.
std::optional<Group> AssembleGang(std::vector<const NodeCandidate*> ranked, const NodeCandidate* first,
                                  const std::vector<int64_t>& score, int nnodes) {
  if (static_cast<int>(ranked.size()) < nnodes) return std::nullopt;
  auto take = [&](const std::vector<const NodeCandidate*>& from) {
    Group g;
    std::set<std::string> racks;
    for (int i = 0; i < nnodes; ++i) {
      g.members.push_back(from[static_cast<size_t>(i)]);
      g.score += score[static_cast<size_t>(from[static_cast<size_t>(i)] - first)];
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

// Plugins that need no device choice score every candidate; the best nodesToScore of each vendor
// (by those) get their devices chosen and the other plugins' scores too. Each plugin's scores are
// normalised over the candidates it scored, then added with weights. A CPU job has no devices to
// choose: every plugin scores what the job does to the node as it is.
std::optional<Placement> Framework::ScoreAndAssemble(CycleState& state, const std::vector<NodeView>& nodes,
                                                     std::vector<NodeCandidate>& candidates) {
  const PlacementRequest& request = state.request;
  std::vector<int64_t> total(candidates.size(), 0);
  auto add = [&](const WeightedScore& ws, const std::vector<size_t>& which, std::vector<int64_t> raw) {
    ws.plugin->NormalizeScore(raw);
    for (size_t k = 0; k < which.size(); ++k) total[which[k]] += ws.weight * raw[k];
  };
  std::vector<size_t> all(candidates.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  std::vector<const WeightedScore*> selecting;  // the plugins that read the device choice
  for (const WeightedScore& ws : plugins_.score) {
    if (ws.plugin->NeedsDeviceSelection()) {
      selecting.push_back(&ws);
      continue;
    }
    std::vector<int64_t> raw;
    raw.reserve(all.size());
    for (size_t i : all) raw.push_back(ws.plugin->Score(state, candidates[i]));
    add(ws, all, std::move(raw));
  }
  auto better = [&](size_t a, size_t b) {
    if (total[a] != total[b]) return total[a] > total[b];
    return a < b;  // ties: view order (candidates are made in it)
  };
  std::map<Vendor, std::vector<size_t>> ranked;
  for (size_t i : all) ranked[candidates[i].vendor].push_back(i);
  const size_t keep = std::max<size_t>(nodes_to_score_, static_cast<size_t>(request.nnodes) * 2);
  std::vector<size_t> finalists;
  for (auto& [vendor, list] : ranked) {
    if (list.size() > keep) {
      std::partial_sort(list.begin(), list.begin() + static_cast<long>(keep), list.end(), better);
      list.resize(keep);
    }
    finalists.insert(finalists.end(), list.begin(), list.end());
  }
  std::vector<std::vector<int64_t>> raw(selecting.size(), std::vector<int64_t>(finalists.size()));
  std::vector<int64_t> chosen_raw(selecting.size());
  for (size_t k = 0; k < finalists.size(); ++k) {
    NodeCandidate& c = candidates[finalists[k]];
    if (request.Fractional() && !selecting.empty()) {
      ChooseShare(state, c, selecting, chosen_raw);
    } else {
      if (request.devices_per_node > 0) {
        const size_t index = static_cast<size_t>(c.node - nodes.data());
        SelectDevices(request, c, request.Fractional() ? kNoTable : PairTable(index, *c.node),
                      summaries_[index].index_ordered);
      }
      for (size_t j = 0; j < selecting.size(); ++j) chosen_raw[j] = selecting[j]->plugin->Score(state, c);
    }
    for (size_t j = 0; j < selecting.size(); ++j) raw[j][k] = chosen_raw[j];
  }
  for (size_t j = 0; j < selecting.size(); ++j) add(*selecting[j], finalists, std::move(raw[j]));

  std::optional<Group> best;
  Vendor best_vendor = Vendor::kCpu;
  for (auto& [vendor, list] : ranked) {
    std::sort(list.begin(), list.end(), better);
    std::vector<const NodeCandidate*> ordered;
    for (size_t i : list) ordered.push_back(&candidates[i]);
    auto group = AssembleGang(ordered, candidates.data(), total, request.nnodes);
    if (!group) continue;
    const bool better_group =
        !best || std::make_tuple(group->racks, -group->score) < std::make_tuple(best->racks, -best->score);
    if (better_group) {
      best = std::move(group);
      best_vendor = vendor;
    }
  }
  if (!best) return std::nullopt;
  return ToPlacement(request, best_vendor, best->members);
}

}  // namespace hetpool::scheduler
