// Filter ContainerRuntime: a job in container images goes only to nodes whose agent found a
// container runtime (JobSpec.container; the agent's --container-runtime). Required in every
// profile, so no profile can send an image job where it cannot start.
#include "scheduler/plugins/factories.h"

namespace hetpool::scheduler::plugins {
namespace {

class ContainerRuntime final : public NodeFilterPlugin {
 public:
  absl::string_view Name() const override { return "ContainerRuntime"; }
  std::optional<FilterVerdict> FilterNode(CycleState& state, const NodeView& node) override {
    if (!state.request.in_image || !node.container_runtime.empty()) return std::nullopt;
    return FilterVerdict{Rejection::kWaiting, "no container runtime on the node (the job runs in an image)"};
  }
};

}  // namespace

std::shared_ptr<Plugin> NewContainerRuntime() { return std::make_shared<ContainerRuntime>(); }

}  // namespace hetpool::scheduler::plugins
