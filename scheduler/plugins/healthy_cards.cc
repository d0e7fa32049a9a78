// Score HealthyCards: a placement on cards that are well beats one that takes a degraded card
// (device.h's Degraded: throttled, its PCIe link narrowed, a repair waiting for a reset). The
// card still runs jobs, but last: a gang whose ranks wait on one slow card is the classic
// straggler (issue 61, item 6). In the default profile its weight outweighs every other score.
#include "scheduler/plugins/factories.h"

namespace hetpool::scheduler::plugins {
namespace {

class HealthyCards final : public ScorePlugin {
 public:
  absl::string_view Name() const override { return "HealthyCards"; }
  bool NeedsDeviceSelection() const override { return true; }
  int64_t Score(CycleState&, const NodeCandidate& c) override {
    int64_t degraded = 0;
    for (const DeviceView* dv : c.chosen) degraded += dv->device->Degraded() ? 1 : 0;
    return -degraded;
  }
};

}  // namespace

std::shared_ptr<Plugin> NewHealthyCards() { return std::make_shared<HealthyCards>(); }

}  // namespace hetpool::scheduler::plugins
