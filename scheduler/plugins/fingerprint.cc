// Filter Fingerprint: the card can run the job's code (CanRun) and is of an allowed vendor, model
// and class. A card that fails can never run the job: a "never" rejection.
#include "scheduler/plugins/factories.h"

namespace hetpool::scheduler::plugins {
namespace {

class Fingerprint final : public DeviceFilterPlugin {
 public:
  absl::string_view Name() const override { return "Fingerprint"; }
  std::optional<FilterVerdict> FilterDevice(CycleState& state, const NodeView&, const DeviceView& dv) override {
    const drivers::CanRunResult& verdict = state.qualify.Get(*dv.device);
    if (verdict.compatibility != drivers::Compatibility::kNo) return std::nullopt;
    return FilterVerdict{Rejection::kNever, verdict.reason};
  }
};

}  // namespace

std::shared_ptr<Plugin> NewFingerprint() { return std::make_shared<Fingerprint>(); }

}  // namespace hetpool::scheduler::plugins
