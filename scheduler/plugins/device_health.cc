// Filter DeviceHealth: the vendor library reports the card healthy (it may recover: waiting).
#include "scheduler/plugins/factories.h"

namespace hetpool::scheduler::plugins {
namespace {

class DeviceHealth final : public DeviceFilterPlugin {
 public:
  absl::string_view Name() const override { return "DeviceHealth"; }
  std::optional<FilterVerdict> FilterDevice(CycleState&, const NodeView&, const DeviceView& dv) override {
    if (dv.device->healthy) return std::nullopt;
    return FilterVerdict{Rejection::kWaiting, dv.device->health_message};
  }
};

}  // namespace

std::shared_ptr<Plugin> NewDeviceHealth() { return std::make_shared<DeviceHealth>(); }

}  // namespace hetpool::scheduler::plugins
