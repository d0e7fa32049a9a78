// Score BestFit: the node the placement leaves with the least free (whole cards, or the share
// left on the card a fractional job takes), so big holes stay whole for big jobs.
#include <algorithm>

#include "scheduler/fragmentation.h"
#include "scheduler/plugins/factories.h"

namespace hetpool::scheduler::plugins {

int64_t LeftAfter(const PlacementRequest& r, const NodeCandidate& c) {
  if (r.Fractional()) {  // on the device best fit would take: the least share left that fits
    int32_t least = kWholeGpuMilli;
    for (const DeviceView* dv : c.fitting) least = std::min(least, dv->milli_free);
    return least - r.device_milli;
  }
  return static_cast<int64_t>(c.fitting.size()) - r.devices_per_node;
}

namespace {

class BestFit final : public ScorePlugin {
 public:
  absl::string_view Name() const override { return "BestFit"; }
  int64_t Score(CycleState& state, const NodeCandidate& c) override { return -LeftAfter(state.request, c); }
};

}  // namespace

std::shared_ptr<Plugin> NewBestFit() { return std::make_shared<BestFit>(); }

}  // namespace hetpool::scheduler::plugins
