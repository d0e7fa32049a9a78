// Filter HostResources: the node has the host CPU and memory the job asks for each node free.
// More than the node has at all can never fit ("never"); more than it has free now waits. A node
// that reports no CPU or memory total is not limited in it.
#include "absl/strings/str_cat.h"
#include "scheduler/plugins/factories.h"

namespace hetpool::scheduler::plugins {
namespace {

class HostResources final : public NodeFilterPlugin {
 public:
  absl::string_view Name() const override { return "HostResources"; }
  uint32_t Judgements() const override { return static_cast<uint32_t>(FilterJudges::kFreeHost); }
  std::optional<FilterVerdict> FilterNode(CycleState& state, const NodeView& node) override {
    const PlacementRequest& r = state.request;
    if (r.cpu_milli > 0 && node.cpu_milli_total > 0) {
      if (r.cpu_milli > node.cpu_milli_total) {
        return FilterVerdict{Rejection::kNever,
                             absl::StrCat("needs ", r.cpu_milli, " milli-CPU; the node has ", node.cpu_milli_total)};
      }
      if (r.cpu_milli > node.cpu_milli_free) {
        return FilterVerdict{Rejection::kWaiting, absl::StrCat("host CPU in use: ", node.cpu_milli_free, " of ",
                                                               node.cpu_milli_total, " milli-CPU free")};
      }
    }
    if (r.host_memory_mib > 0 && node.host_memory_total_mib > 0) {
      if (r.host_memory_mib > node.host_memory_total_mib) {
        return FilterVerdict{Rejection::kNever,
                             absl::StrCat("needs ", r.host_memory_mib, " MiB of host memory; the node has ",
                                          node.host_memory_total_mib)};
      }
      if (r.host_memory_mib > node.host_memory_free_mib) {
        return FilterVerdict{Rejection::kWaiting, absl::StrCat("host memory in use: ", node.host_memory_free_mib,
                                                               " of ", node.host_memory_total_mib, " MiB free")};
      }
    }
    return std::nullopt;
  }
};

}  // namespace

std::shared_ptr<Plugin> NewHostResources() { return std::make_shared<HostResources>(); }

}  // namespace hetpool::scheduler::plugins
