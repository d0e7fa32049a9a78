// Filter NodeSchedulable: the node is Ready, not drained, not faulted by its agent and not
// quarantined (waiting can change each).
#include "scheduler/plugins/factories.h"

namespace hetpool::scheduler::plugins {
namespace {

class NodeSchedulable final : public NodeFilterPlugin {
 public:
  absl::string_view Name() const override { return "NodeSchedulable"; }
  std::optional<FilterVerdict> FilterNode(CycleState&, const NodeView& node) override {
    if (node.schedulable) return std::nullopt;
    return FilterVerdict{Rejection::kWaiting, "node not ready, drained or out of service"};
  }
};

}  // namespace

std::shared_ptr<Plugin> NewNodeSchedulable() { return std::make_shared<NodeSchedulable>(); }

}  // namespace hetpool::scheduler::plugins
