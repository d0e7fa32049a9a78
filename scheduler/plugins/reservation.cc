// Filter Reservation: a device held for the job first in line (the daemon's backfill
// reservation, DeviceView.held) is not for the jobs behind it; they wait for it like for a busy
// one, and their pending reason says why.
#include "scheduler/plugins/factories.h"

namespace hetpool::scheduler::plugins {
namespace {

class Reservation final : public DeviceFilterPlugin {
 public:
  absl::string_view Name() const override { return "Reservation"; }
  std::optional<FilterVerdict> FilterDevice(CycleState&, const NodeView&, const DeviceView& dv) override {
    if (!dv.held) return std::nullopt;
    return FilterVerdict{Rejection::kWaiting, "held for the job first in line"};
  }
};

}  // namespace

std::shared_ptr<Plugin> NewReservation() { return std::make_shared<Reservation>(); }

}  // namespace hetpool::scheduler::plugins
