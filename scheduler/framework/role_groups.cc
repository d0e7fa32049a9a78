#include "scheduler/framework/role_groups.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "drivers/fingerprint/card_speed.h"
#include "scheduler/framework/pending_reason.h"

namespace hetpool::scheduler {
namespace {

// Nodes with at least `need` cards of one vendor that qualify for `requirements` (free or not,
// and `free_only`: free and healthy now, on a schedulable node): by vendor, and in all (a node
// with two such vendors counts once there: it hosts one group of a job).
struct Capable {
  std::map<Vendor, int> by_vendor;
  int nodes = 0;
};

Capable NodesThatCanHold(const PlacementRequest& request, const Requirements& requirements, int need,
                         const std::vector<NodeView>& nodes, bool free_only) {
  QualifyCache qualify(requirements);
  Capable capable;
  for (const NodeView& node : nodes) {
    if (free_only && !node.schedulable) continue;
    qualify.SetNode(node.context);
    std::map<Vendor, int> cards;
    for (const DeviceView& dv : node.devices) {
      if (qualify.Get(*dv.device).compatibility == drivers::Compatibility::kNo) continue;
      if (free_only && !Available(request, dv)) continue;
      ++cards[dv.device->vendor];
    }
    bool any = false;
    for (const auto& [vendor, n] : cards) {
      if (n < need) continue;
      ++capable.by_vendor[vendor];
      any = true;
    }
    capable.nodes += any ? 1 : 0;
  }
  return capable;
}

// The group's refusal, named, with what it carries (the pending reason the job shows).
absl::Status Prefixed(const absl::Status& status, absl::string_view prefix) {
  absl::Status out(status.code(), absl::StrCat(prefix, status.message()));
  status.ForEachPayload([&out](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

// The node can no longer take another group of this job (one torchrun agent per node and job).
void TakeNode(const std::string& name, std::vector<NodeView>& views) {
  for (NodeView& view : views) {
    if (view.name != name) continue;
    view.schedulable = false;
    view.generation = ContentGeneration(view);
  }
}

absl::StatusOr<Placement> PlaceDeclaredGroups(const PlacementRequest& request, const std::vector<NodeView>& nodes,
                                              const PlaceOneGroup& place) {
  std::vector<int> capable(request.groups.size());
  for (size_t g = 0; g < request.groups.size(); ++g) {
    const RoleGroup& group = request.groups[g];
    capable[g] = NodesThatCanHold(GroupRequest(request, group), group.requirements, group.devices_per_node, nodes,
                                  /*free_only=*/false)
                     .nodes;
  }
  std::vector<size_t> order(request.groups.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return capable[a] < capable[b]; });

  std::vector<NodeView> views = nodes;
  std::vector<std::vector<NodeAssignment>> placed(request.groups.size());
  for (size_t g : order) {
    const RoleGroup& group = request.groups[g];
    auto placement = place(GroupRequest(request, group), views);
    if (!placement.ok()) {
      return Prefixed(placement.status(), absl::StrCat("group ", group.name, ": "));
    }
    for (NodeAssignment& node : placement->nodes) {
      node.vendor = placement->vendor;
      node.group = group.name;
      TakeNode(node.node, views);
      placed[g].push_back(std::move(node));
    }
  }
  Placement out;
  for (auto& group : placed) {
    for (auto& node : group) out.nodes.push_back(std::move(node));
  }
  out.vendor = out.nodes.front().vendor;
  return out;
}

// Vendors present among the nodes and allowed by the request, fastest card first (unknown speeds
// last, in vendor order).
std::vector<Vendor> VendorsFastestFirst(const PlacementRequest& request, const std::vector<NodeView>& nodes) {
  const Precision precision = drivers::ComputePrecision(request.requirements.run.precisions);
  std::map<Vendor, double> fastest;
  for (const NodeView& node : nodes) {
    for (const DeviceView& dv : node.devices) {
      const Vendor v = dv.device->vendor;
      const auto& allowed = request.requirements.vendors;
      if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), v) == allowed.end()) continue;
      double& best = fastest[v];
      best = std::max(best, drivers::PeakTflops(*dv.device, precision).value_or(0));
    }
  }
  std::vector<Vendor> vendors;
  for (const auto& [vendor, speed] : fastest) vendors.push_back(vendor);
  std::stable_sort(vendors.begin(), vendors.end(), [&](Vendor a, Vendor b) { return fastest[a] > fastest[b]; });
  return vendors;
}

absl::StatusOr<Placement> PlaceAcrossVendors(const PlacementRequest& request, const std::vector<NodeView>& nodes,
                                             const PlaceOneGroup& place) {
  PlacementRequest whole = request;
  whole.mixed_vendors = false;
  auto one_vendor = place(whole, nodes);
  if (one_vendor.ok()) {
    for (NodeAssignment& node : one_vendor->nodes) node.vendor = one_vendor->vendor;
    return one_vendor;
  }
  if (!absl::IsUnavailable(one_vendor.status()) && !absl::IsFailedPrecondition(one_vendor.status())) {
    return one_vendor.status();
  }
  const int need = request.devices_per_node;
  const int capable = NodesThatCanHold(request, request.requirements, need, nodes, /*free_only=*/false).nodes;
  PendingReason why;
  why.needs = absl::StrCat(request.nnodes, " nodes x ", need, " cards of any vendors (one vendor per node)");
  if (capable < request.nnodes) {
    why.never = true;
    why.closest = absl::StrCat(capable, " node(s) of the pool could hold their share");
    absl::Status never = absl::FailedPreconditionError(absl::StrCat("needs ", why.needs, "; ", why.closest));
    AttachPendingReason(never, why);
    return never;
  }
  std::vector<NodeView> views = nodes;
  Placement out;
  int remaining = request.nnodes;
  for (Vendor vendor : VendorsFastestFirst(request, nodes)) {
    if (remaining == 0) break;
    PlacementRequest part = whole;
    part.requirements.vendors = {vendor};
    const Capable free = NodesThatCanHold(part, part.requirements, need, views, /*free_only=*/true);
    auto it = free.by_vendor.find(vendor);
    // The count is an upper bound (other filters: host resources, quota, reservation); the policy
    // decides, from the most nodes down.
    for (int k = std::min(remaining, it == free.by_vendor.end() ? 0 : it->second); k > 0; --k) {
      part.nnodes = k;
      auto placement = place(part, views);
      if (!placement.ok()) continue;
      for (NodeAssignment& node : placement->nodes) {
        node.vendor = vendor;
        node.group = std::string(VendorName(vendor));
        TakeNode(node.node, views);
        out.nodes.push_back(std::move(node));
      }
      remaining -= k;
      break;
    }
  }
  if (remaining > 0) {
    why.closest = absl::StrCat(request.nnodes - remaining, " node(s) can take their share now");
    absl::Status wait = absl::UnavailableError(absl::StrCat("needs ", why.needs, " free; ", why.closest));
    AttachPendingReason(wait, why);
    return wait;
  }
  out.vendor = out.nodes.front().vendor;
  return out;
}

}  // namespace

PlacementRequest GroupRequest(const PlacementRequest& job, const RoleGroup& group) {
  PlacementRequest one = job;
  one.groups.clear();
  one.mixed_vendors = false;
  one.nnodes = group.nnodes;
  one.devices_per_node = group.devices_per_node;
  one.requirements = group.requirements;
  return one;
}

absl::StatusOr<Placement> PlaceRoleGroups(const PlacementRequest& request, const std::vector<NodeView>& nodes,
                                          const PlaceOneGroup& place) {
  if (request.Fractional()) return absl::InvalidArgumentError("a job across vendors takes whole cards");
  if (request.groups.empty() && request.devices_per_node <= 0) {
    return absl::InvalidArgumentError("a job across vendors needs cards");
  }
  const std::vector<NodeView>* views = &nodes;
  std::vector<NodeView> with_collective;
  if (!request.collective.empty()) {
    // Nodes without the library wait like a drained node would (it may be installed later).
    with_collective = nodes;
    int have = 0;
    for (NodeView& view : with_collective) {
      if (view.context.collectives.contains(request.collective)) {
        ++have;
        continue;
      }
      view.schedulable = false;
      view.generation = ContentGeneration(view);
    }
    if (have == 0) {
      PendingReason why;
      why.never = true;
      why.needs = absl::StrCat("nodes with ", request.collective, " installed");
      why.closest = "no node reports it";
      absl::Status never = absl::FailedPreconditionError(
          absl::StrCat("collective ", request.collective, ": no node of the pool reports it installed"));
      AttachPendingReason(never, why);
      return never;
    }
    views = &with_collective;
  }
  if (!request.groups.empty()) return PlaceDeclaredGroups(request, *views, place);
  return PlaceAcrossVendors(request, *views, place);
}

}  // namespace hetpool::scheduler
