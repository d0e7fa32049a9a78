#include "scheduler/topology_policy.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "scheduler/first_fit.h"

namespace hetpool::scheduler {
namespace {

int PairScore(const DeviceRecord& a, const DeviceRecord& b) {
  int best = 0;
  for (const auto& l : a.links) {
    if (l.peer_device_id != b.id) continue;
    switch (l.kind) {
      case LinkKind::kNvLink:
      case LinkKind::kMetaxLink:
      case LinkKind::kMluLink:
      case LinkKind::kXeLink: best = std::max(best, 100 + l.count); break;
      case LinkKind::kPcieSwitch: best = std::max(best, 40); break;
      case LinkKind::kPcieHostBridge: best = std::max(best, 30); break;
      case LinkKind::kSameNuma: best = std::max(best, 20); break;
      case LinkKind::kCrossSocket: best = std::max(best, 10); break;
    }
  }
  return best;
}

// Visits every k-subset of [0, n) in lexicographic order.
template <typename Fn>
void ForEachSubset(int n, int k, Fn&& fn) {
  std::vector<int> idx(static_cast<size_t>(k));
  std::iota(idx.begin(), idx.end(), 0);
  while (true) {
    fn(idx);
    int i = k - 1;
    while (i >= 0 && idx[static_cast<size_t>(i)] == n - k + i) --i;
    if (i < 0) return;
    ++idx[static_cast<size_t>(i)];
    for (int j = i + 1; j < k; ++j) idx[static_cast<size_t>(j)] = idx[static_cast<size_t>(j - 1)] + 1;
  }
}

}  // namespace

int LinkScore(const std::vector<const DeviceRecord*>& devices) {
  if (devices.size() < 2) return 0;
  int sum = 0, pairs = 0;
  for (size_t i = 0; i < devices.size(); ++i) {
    for (size_t j = i + 1; j < devices.size(); ++j) {
      sum += PairScore(*devices[i], *devices[j]);
      ++pairs;
    }
  }
  return sum / pairs;
}

std::vector<const DeviceRecord*> ChooseDevices(const std::vector<const DeviceRecord*>& free_in, int count) {
  std::vector<const DeviceRecord*> free = free_in;
  std::sort(free.begin(), free.end(), [](const DeviceRecord* a, const DeviceRecord* b) { return a->index < b->index; });
  const int n = static_cast<int>(free.size());
  if (count > n || count <= 0) return {};
  if (count == n) return free;
  // Subsets of a node's devices are few (C(8,4) = 70, C(16,8) = 12,870): search them all.
  std::vector<int> best;
  int best_score = -1, best_rest = -1;
  ForEachSubset(n, count, [&](const std::vector<int>& pick) {
    std::vector<const DeviceRecord*> chosen, rest;
    size_t p = 0;
    for (int i = 0; i < n; ++i) {
      if (p < pick.size() && pick[p] == i) {
        chosen.push_back(free[static_cast<size_t>(i)]);
        ++p;
      } else {
        rest.push_back(free[static_cast<size_t>(i)]);
      }
    }
    const int score = LinkScore(chosen), rest_score = LinkScore(rest);
    if (score > best_score || (score == best_score && rest_score > best_rest)) {
      best = pick;
      best_score = score;
      best_rest = rest_score;
    }
  });
  std::vector<const DeviceRecord*> out;
  for (int i : best) out.push_back(free[static_cast<size_t>(i)]);
  return out;
}

absl::StatusOr<Placement> TopologyPolicy::PlaceFractional(const PlacementRequest& request,
                                                         const std::vector<NodeView>& nodes) {
  // Best fit per node: the qualifying device with the least share left that still fits, so
  // partly used devices fill up and whole devices stay whole (the FGD replay's "bestfit"; the
  // full FGD score needs the workload's shape mix, which the daemon does not keep yet).
  struct Option {
    const NodeView* node;
    const DeviceView* device;
  };
  std::map<Vendor, std::vector<Option>> by_vendor;
  QualifyCache qualify(request.requirements);
  for (const auto& node : nodes) {
    if (!node.schedulable) continue;
    std::map<Vendor, const DeviceView*> best;
    qualify.SetNode(node.context);
    for (const auto& dv : node.devices) {
      if (!Available(request, dv)) continue;
      if (qualify.Get(*dv.device).compatibility == drivers::Compatibility::kNo) continue;
      const DeviceView*& b = best[dv.device->vendor];
      if (b == nullptr || dv.milli_free < b->milli_free ||
          (dv.milli_free == b->milli_free && dv.device->index < b->device->index)) {
        b = &dv;
      }
    }
    for (const auto& [vendor, dv] : best) by_vendor[vendor].push_back({&node, dv});
  }
  std::optional<Placement> best;
  int64_t best_left = 0;
  for (auto& [vendor, options] : by_vendor) {
    if (static_cast<int>(options.size()) < request.nnodes) continue;
    std::stable_sort(options.begin(), options.end(), [](const Option& a, const Option& b) {
      if (a.device->milli_free != b.device->milli_free) return a.device->milli_free < b.device->milli_free;
      return a.node->name < b.node->name;
    });
    Placement p;
    p.vendor = vendor;
    int64_t left = 0;
    for (int i = 0; i < request.nnodes; ++i) {
      const Option& o = options[static_cast<size_t>(i)];
      p.nodes.push_back({o.node->name, {o.device->device->id}, 0, request.device_milli,
                         MemoryHeld(request, *o.device->device)});
      left += o.device->milli_free - request.device_milli;
    }
    if (!best || left < best_left) {
      best = std::move(p);
      best_left = left;
    }
  }
  if (best) return *best;
  FirstFitPolicy first_fit;  // for its verdict: unavailable now or never
  return first_fit.Place(request, nodes);
}

absl::StatusOr<Placement> TopologyPolicy::Place(const PlacementRequest& request, const std::vector<NodeView>& nodes) {
  // CPU jobs, and the verdict when nothing fits (waiting vs never, with CanRun's reasons), come
  // from first fit; this policy chooses better among the feasible placements.
  FirstFitPolicy first_fit;
  if (request.devices_per_node == 0) return first_fit.Place(request, nodes);
  if (request.Fractional()) return PlaceFractional(request, nodes);
  QualifyCache qualify(request.requirements);
  struct Candidate {
    const NodeView* node;
    std::vector<const DeviceRecord*> free;  // free, healthy, qualifying, of the chosen vendor
  };
  std::map<Vendor, std::vector<Candidate>> by_vendor;
  for (const auto& node : nodes) {
    if (!node.schedulable) continue;
    std::map<Vendor, std::vector<const DeviceRecord*>> free;
    qualify.SetNode(node.context);
    for (const auto& dv : node.devices) {
      if (!Available(request, dv)) continue;
      if (qualify.Get(*dv.device).compatibility == drivers::Compatibility::kNo) continue;
      free[dv.device->vendor].push_back(dv.device);
    }
    for (auto& [vendor, devices] : free) {
      if (static_cast<int>(devices.size()) >= request.devices_per_node) {
        by_vendor[vendor].push_back({&node, std::move(devices)});
      }
    }
  }
  std::optional<Placement> best;
  std::tuple<int, int, int> best_key{0, 0, 0};  // (racks spanned, free devices left, -link score)
  for (auto& [vendor, all_candidates] : by_vendor) {
    if (static_cast<int>(all_candidates.size()) < request.nnodes) continue;
    std::stable_sort(all_candidates.begin(), all_candidates.end(), [](const Candidate& a, const Candidate& b) {
      if (a.free.size() != b.free.size()) return a.free.size() < b.free.size();
      return a.node->name < b.node->name;
    });
    // A multi-node job prefers the rack whose fitting nodes leave the fewest devices free; only
    // when no rack can hold it does it span racks.
    std::vector<Candidate> candidates = all_candidates;
    int racks = 1;
    if (request.nnodes > 1) {
      std::map<std::string, std::vector<Candidate>> by_rack;
      for (const auto& c : all_candidates) by_rack[c.node->rack].push_back(c);
      std::optional<std::pair<int, std::string>> best_rack;
      for (const auto& [rack, members] : by_rack) {
        if (rack.empty() || static_cast<int>(members.size()) < request.nnodes) continue;
        int left = 0;
        for (int i = 0; i < request.nnodes; ++i) left += static_cast<int>(members[static_cast<size_t>(i)].free.size());
        if (!best_rack || left < best_rack->first) best_rack = std::make_pair(left, rack);
      }
      if (best_rack) {
        candidates = by_rack[best_rack->second];
      } else {
        std::set<std::string> spanned;
        for (int i = 0; i < request.nnodes; ++i) spanned.insert(all_candidates[static_cast<size_t>(i)].node->rack);
        racks = static_cast<int>(spanned.size());
      }
    }
    Placement p;
    p.vendor = vendor;
    int left = 0, score = 0;
    for (int i = 0; i < request.nnodes; ++i) {
      const Candidate& c = candidates[static_cast<size_t>(i)];
      auto chosen = ChooseDevices(c.free, request.devices_per_node);
      NodeAssignment a{c.node->name, {}, LinkScore(chosen), 1000, 0};
      for (const DeviceRecord* d : chosen) a.device_ids.push_back(d->id);
      if (!chosen.empty()) a.device_memory_mib = chosen.front()->memory_mib;
      left += static_cast<int>(c.free.size()) - request.devices_per_node;
      score += a.link_score;
      p.nodes.push_back(std::move(a));
    }
    const std::tuple<int, int, int> key{racks, left, -score};
    if (!best || key < best_key) {
      best = std::move(p);
      best_key = key;
    }
  }
  if (!best) return first_fit.Place(request, nodes);  // for its reasons
  return *best;
}

}  // namespace hetpool::scheduler
