// Filter Capacity: the whole card is free, or (a share) enough milli and memory are left on it.
// A share asking more memory than the card has can never fit: "never"; anything else in use
// frees up: "waiting".
#include "absl/strings/str_cat.h"
#include "scheduler/plugins/factories.h"

namespace hetpool::scheduler::plugins {
namespace {

class Capacity final : public DeviceFilterPlugin {
 public:
  absl::string_view Name() const override { return "Capacity"; }
  uint32_t Judgements() const override {
    return static_cast<uint32_t>(FilterJudges::kFreeDevices) | static_cast<uint32_t>(FilterJudges::kPlainUse);
  }
  std::optional<FilterVerdict> FilterDevice(CycleState& state, const NodeView&, const DeviceView& dv) override {
    const PlacementRequest& r = state.request;
    if (r.Fractional() && MemoryHeld(r, *dv.device) > dv.device->memory_mib) {
      return FilterVerdict{Rejection::kNever, absl::StrCat("share needs ", MemoryHeld(r, *dv.device), " MiB of a ",
                                                           dv.device->memory_mib, " MiB device")};
    }
    const bool fits =
        r.Fractional() ? dv.milli_free >= r.device_milli && dv.memory_free_mib >= MemoryHeld(r, *dv.device) : dv.free;
    if (fits) return std::nullopt;
    return FilterVerdict{Rejection::kWaiting, "in use"};
  }
};

}  // namespace

std::shared_ptr<Plugin> NewCapacity() { return std::make_shared<Capacity>(); }

}  // namespace hetpool::scheduler::plugins
