// PreFilter RequestShape: refuses shapes no node could have, before any node is looked at.
#include "absl/strings/str_cat.h"
#include "scheduler/plugins/factories.h"

namespace hetpool::scheduler::plugins {
namespace {

class RequestShape final : public PreFilterPlugin {
 public:
  absl::string_view Name() const override { return "RequestShape"; }
  absl::Status PreFilter(CycleState& state) override {
    const PlacementRequest& r = state.request;
    if (r.nnodes < 1) return absl::FailedPreconditionError("a job needs at least one node");
    if (r.devices_per_node > kMaxDevicesPerNodeRequest) {
      return absl::FailedPreconditionError(absl::StrCat("no node has ", r.devices_per_node, " devices"));
    }
    return absl::OkStatus();
  }

 private:
  static constexpr int kMaxDevicesPerNodeRequest = 64;
};

}  // namespace

std::shared_ptr<Plugin> NewRequestShape() { return std::make_shared<RequestShape>(); }

}  // namespace hetpool::scheduler::plugins
