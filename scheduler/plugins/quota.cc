// Filter Quota: the job's owner may take more cards of the device's class (vendor and
// fingerprint) under the quota table; the daemon answers through PlacementRequest.quota_blocked.
// Over quota waits ("quota: user carol holds 1 of 1 cards (*); the job needs 1"): the owner's
// other jobs free them. What the quota rules out for good is refused at submission.
#include "scheduler/plugins/factories.h"

namespace hetpool::scheduler::plugins {
namespace {

class Quota final : public DeviceFilterPlugin {
 public:
  absl::string_view Name() const override { return "Quota"; }
  std::optional<FilterVerdict> FilterDevice(CycleState& state, const NodeView&, const DeviceView& dv) override {
    if (!state.request.quota_blocked) return std::nullopt;
    std::optional<std::string> blocked = state.request.quota_blocked(*dv.device);
    if (!blocked) return std::nullopt;
    return FilterVerdict{Rejection::kWaiting, std::move(*blocked)};
  }
};

}  // namespace

std::shared_ptr<Plugin> NewQuota() { return std::make_shared<Quota>(); }

}  // namespace hetpool::scheduler::plugins
