// Score Packing: the GPU-packing baseline of the FGD paper. A share goes to a device already
// partly used if it can; otherwise any job goes to a node with devices in use before an idle
// node; within each tier, the node with the most in use. Raw scores (no normalisation): the tiers
// are the point, so it is meant to run alone, as a baseline to measure others against.
#include "scheduler/plugins/factories.h"

namespace hetpool::scheduler::plugins {
namespace {

class Packing final : public ScorePlugin {
 public:
  absl::string_view Name() const override { return "Packing"; }
  bool NeedsDeviceSelection() const override { return true; }
  int64_t Score(CycleState& state, const NodeCandidate& c) override {
    const UsableMilli gpu = UsableMilliOf(*c.node, c.vendor);
    const int64_t used = gpu.capacity - gpu.left;
    int tier = used > 0 ? 1 : 2;
    if (state.request.Fractional()) {
      for (const DeviceView* dv : c.chosen) {
        if (!dv->free) tier = 0;
      }
    }
    constexpr int64_t kTier = int64_t{1} << 32;
    return -tier * kTier + used;
  }
  void NormalizeScore(std::vector<int64_t>&) override {}
};

}  // namespace

std::shared_ptr<Plugin> NewPacking() { return std::make_shared<Packing>(); }

}  // namespace hetpool::scheduler::plugins
