// Score Spread: BestFit's opposite, the node the placement leaves with the most free (for pools
// that value headroom per node, e.g. jobs that grow, over packing).
#include "scheduler/plugins/factories.h"

namespace hetpool::scheduler::plugins {
namespace {

class Spread final : public ScorePlugin {
 public:
  absl::string_view Name() const override { return "Spread"; }
  int64_t Score(CycleState& state, const NodeCandidate& c) override { return LeftAfter(state.request, c); }
};

}  // namespace

std::shared_ptr<Plugin> NewSpread() { return std::make_shared<Spread>(); }

}  // namespace hetpool::scheduler::plugins
