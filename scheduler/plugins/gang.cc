// Permit Gang: all nnodes are present, each with all its devices; otherwise nothing is bound.
#include "absl/strings/str_cat.h"
#include "scheduler/plugins/factories.h"

namespace hetpool::scheduler::plugins {
namespace {

class Gang final : public PermitPlugin {
 public:
  absl::string_view Name() const override { return "Gang"; }
  absl::Status Permit(CycleState& state, const Placement& p) override {
    const PlacementRequest& r = state.request;
    if (static_cast<int>(p.nodes.size()) != r.nnodes) {
      return absl::UnavailableError(absl::StrCat("only ", p.nodes.size(), " of ", r.nnodes, " nodes found"));
    }
    const size_t per_node = r.Fractional() ? 1 : static_cast<size_t>(r.devices_per_node);
    for (const NodeAssignment& a : p.nodes) {
      if (a.device_ids.size() != per_node) {
        return absl::UnavailableError(absl::StrCat(a.node, " got ", a.device_ids.size(), " of ", per_node, " devices"));
      }
    }
    return absl::OkStatus();
  }
};

}  // namespace

std::shared_ptr<Plugin> NewGang() { return std::make_shared<Gang>(); }

}  // namespace hetpool::scheduler::plugins
