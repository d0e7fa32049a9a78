// Filter DeviceHealth: the vendor library reports the card healthy, and no process of none of the
// node's jobs holds it (the agent's `dirty`); either may change: waiting.
#include "scheduler/plugins/factories.h"

namespace hetpool::scheduler::plugins {
namespace {

class DeviceHealth final : public DeviceFilterPlugin {
 public:
  absl::string_view Name() const override { return "DeviceHealth"; }
  std::optional<FilterVerdict> FilterDevice(CycleState&, const NodeView&, const DeviceView& dv) override {
    if (dv.device->Placeable()) return std::nullopt;
    if (!dv.device->healthy) return FilterVerdict{Rejection::kWaiting, dv.device->health_message};
    return FilterVerdict{Rejection::kWaiting, "dirty: " + dv.device->dirty};
  }
};

}  // namespace

std::shared_ptr<Plugin> NewDeviceHealth() { return std::make_shared<DeviceHealth>(); }

}  // namespace hetpool::scheduler::plugins
