// Filter NodeSchedulable: the node is Ready and not drained (waiting can change both).
#include "scheduler/plugins/factories.h"

namespace hetpool::scheduler::plugins {
namespace {

class NodeSchedulable final : public NodeFilterPlugin {
 public:
  absl::string_view Name() const override { return "NodeSchedulable"; }
  std::optional<FilterVerdict> FilterNode(CycleState&, const NodeView& node) override {
    if (node.schedulable) return std::nullopt;
    return FilterVerdict{Rejection::kWaiting, "node not ready or drained"};
  }
};

}  // namespace

std::shared_ptr<Plugin> NewNodeSchedulable() { return std::make_shared<NodeSchedulable>(); }

}  // namespace hetpool::scheduler::plugins
