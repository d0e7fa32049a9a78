// Score TieRank: among placements a heavier score rates alike (FGD's integer levels tie often),
// the one that keeps whole GPUs and whole nodes for the jobs that need them:
//  - a CPU job goes where the least GPU capacity is free, so the CPU it takes strands the least;
//  - a device job goes to a node already in use rather than open an idle one, which stays whole
//    for multi-device jobs.
// Meant as a tie-break: its scores are normalised onto 0..99, so at weight 1 under a score of
// weight 100 it never outweighs one level of that score.
#include <algorithm>

#include "scheduler/plugins/factories.h"

namespace hetpool::scheduler::plugins {
namespace {

class TieRank final : public ScorePlugin {
 public:
  absl::string_view Name() const override { return "TieRank"; }
  int64_t Score(CycleState& state, const NodeCandidate& c) override {
    if (state.request.devices_per_node == 0) return -UsableMilliOf(*c.node, Vendor::kCpu).left;
    if (c.vendor_in_use >= 0) return c.vendor_in_use;  // every candidate is scored: no device reads
    for (const DeviceView& dv : c.node->devices) {
      if (dv.device->vendor == c.vendor && !dv.free) return 1;  // the node is in use
    }
    return 0;
  }
  void NormalizeScore(std::vector<int64_t>& scores) override {
    if (scores.empty()) return;
    const auto [lo, hi] = std::minmax_element(scores.begin(), scores.end());
    const int64_t min = *lo, max = *hi;
    for (int64_t& s : scores) s = max == min ? 0 : (s - min) * 99 / (max - min);
  }
};

}  // namespace

UsableMilli UsableMilliOf(const NodeView& node, Vendor vendor) {
  UsableMilli out;
  for (const DeviceView& dv : node.devices) {
    if ((vendor != Vendor::kCpu && dv.device->vendor != vendor) || !dv.device->Placeable()) continue;
    out.capacity += 1000;
    out.left += dv.free ? 1000 : dv.milli_free;
  }
  return out;
}

std::shared_ptr<Plugin> NewTieRank() { return std::make_shared<TieRank>(); }

}  // namespace hetpool::scheduler::plugins
