#include "src/daemon/state/head_of_line_hold.h"

#include <algorithm>
#include <map>
#include <string>

#include "scheduler/placement_policy.h"

namespace hetpool::daemon {

HeldCards HeadOfLineHold(const scheduler::PlacementRequest& request, const std::vector<scheduler::NodeView>& views) {
  // Per node: the qualifying devices of the vendor with the most of them, how many are free, and
  // how close the node is to holding the job: the least-free part of what it asks (devices, host
  // CPU, host memory), as a fraction of the ask.
  struct Option {
    std::string node;
    size_t free = 0;
    std::set<std::string> devices;
    double closeness = 0;
  };
  // `free` of `asked` of a host resource, as a fraction at most 1 (a node that does not report
  // the resource, its `total` 0, or a job that does not ask for it, is not limited by it).
  auto part = [](double free, double asked, double total) {
    return asked <= 0 || total <= 0 ? 1.0 : std::min(1.0, std::max(0.0, free) / asked);
  };
  std::vector<Option> options;
  scheduler::QualifyCache qualify(request.requirements);
  for (const auto& view : views) {
    if (!view.schedulable) continue;
    // A node without the host CPU or memory the job asks, in all, can never hold it: holding
    // its cards would keep others off them for nothing.
    if ((view.cpu_milli_total > 0 && request.cpu_milli > view.cpu_milli_total) ||
        (view.host_memory_total_mib > 0 && request.host_memory_mib > view.host_memory_total_mib)) {
      continue;
    }
    qualify.SetNode(view.context);
    std::map<Vendor, Option> by_vendor;
    for (const auto& dv : view.devices) {
      if (!dv.device->Placeable() || qualify.Get(*dv.device).compatibility == drivers::Compatibility::kNo) continue;
      Option& o = by_vendor[dv.device->vendor];
      o.node = view.name;
      o.devices.insert(dv.device->id);
      o.free += scheduler::Available(request, dv) ? 1 : 0;
    }
    const Option* best = nullptr;
    for (const auto& [vendor, o] : by_vendor) {
      if (static_cast<int>(o.devices.size()) < request.devices_per_node) continue;
      if (best == nullptr || o.free > best->free) best = &o;
    }
    if (best == nullptr) continue;
    Option chosen = *best;
    const double cards = std::min(1.0, static_cast<double>(chosen.free) / std::max(1, request.devices_per_node));
    chosen.closeness =
        std::min({cards,
                  part(static_cast<double>(view.cpu_milli_free), static_cast<double>(request.cpu_milli),
                       static_cast<double>(view.cpu_milli_total)),
                  part(static_cast<double>(view.host_memory_free_mib), static_cast<double>(request.host_memory_mib),
                       static_cast<double>(view.host_memory_total_mib))});
    options.push_back(std::move(chosen));
  }
  if (static_cast<int>(options.size()) < request.nnodes) return {};
  // Closest first (a node with every card free but its cores taken is no closer than its cores
  // allow), then most free cards: those nodes are likely to hold the job soonest.
  std::stable_sort(options.begin(), options.end(), [](const Option& a, const Option& b) {
    if (a.closeness != b.closeness) return a.closeness > b.closeness;
    if (a.free != b.free) return a.free > b.free;
    return a.node < b.node;
  });
  HeldCards out;
  for (int i = 0; i < request.nnodes; ++i) {
    const Option& o = options[static_cast<size_t>(i)];
    out[o.node] = o.devices;
  }
  return out;
}

}  // namespace hetpool::daemon
