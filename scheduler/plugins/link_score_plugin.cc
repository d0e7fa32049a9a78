// Score LinkScore: the best-connected device set the node offers (link_score.h computes it when
// the framework selects devices).
#include "scheduler/plugins/factories.h"

namespace hetpool::scheduler::plugins {
namespace {

class LinkScorePlugin final : public ScorePlugin {
 public:
  absl::string_view Name() const override { return "LinkScore"; }
  bool NeedsDeviceSelection() const override { return true; }
  int64_t Score(CycleState&, const NodeCandidate& c) override { return c.link_score; }
};

}  // namespace

std::shared_ptr<Plugin> NewLinkScore() { return std::make_shared<LinkScorePlugin>(); }

}  // namespace hetpool::scheduler::plugins
