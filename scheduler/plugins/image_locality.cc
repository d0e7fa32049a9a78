// Score ImageLocality: the node already holds the image the job's vendor there runs (as the
// Kubernetes scheduler's ImageLocality does), so it starts without a pull. Jobs without images
// score every node alike.
#include "scheduler/plugins/factories.h"

namespace hetpool::scheduler::plugins {
namespace {

class ImageLocality final : public ScorePlugin {
 public:
  absl::string_view Name() const override { return "ImageLocality"; }
  int64_t Score(CycleState& state, const NodeCandidate& c) override {
    if (!state.request.in_image || c.node->images == nullptr) return 0;
    auto image = state.request.images.find(c.vendor);
    return image != state.request.images.end() && c.node->images->contains(image->second) ? 1 : 0;
  }
};

}  // namespace

std::shared_ptr<Plugin> NewImageLocality() { return std::make_shared<ImageLocality>(); }

}  // namespace hetpool::scheduler::plugins
