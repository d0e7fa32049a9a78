// Score BestFit: the node the placement leaves with the least free, so big holes stay whole for
// big jobs. args {"of": "devices"} (default): whole cards left, or the share left on the card a
// fractional job takes; min-max normalised like most scores. {"of": "shares"}: the FGD paper's
// best-fit baseline, the node's free GPU share plus its free CPU share after the placement, raw
// (in millionths), to run alone.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "scheduler/fragmentation.h"
#include "scheduler/plugins/factories.h"

namespace hetpool::scheduler::plugins {

int64_t LeftAfter(const PlacementRequest& r, const NodeCandidate& c) {
  if (r.Fractional()) {  // on the device best fit would take: the least share left that fits
    int32_t least = kWholeGpuMilli;
    for (const DeviceView* dv : c.fitting) least = std::min(least, dv->milli_free);
    return least - r.device_milli;
  }
  return static_cast<int64_t>(c.fitting.size()) - r.devices_per_node;
}

namespace {

class BestFit final : public ScorePlugin {
 public:
  explicit BestFit(bool shares) : shares_(shares) {}
  absl::string_view Name() const override { return "BestFit"; }
  int64_t Score(CycleState& state, const NodeCandidate& c) override {
    if (!shares_) return -LeftAfter(state.request, c);
    const PlacementRequest& r = state.request;
    constexpr int64_t kWhole = 1000000;
    const UsableMilli gpu = UsableMilliOf(*c.node, c.vendor);
    const int64_t taken =
        r.devices_per_node == 0 ? 0 : (r.Fractional() ? r.device_milli : int64_t{r.devices_per_node} * kWholeGpuMilli);
    int64_t left = 0;
    if (gpu.capacity > 0) left += (gpu.left - taken) * kWhole / gpu.capacity;
    if (c.node->cpu_milli_total > 0) left += (c.node->cpu_milli_free - r.cpu_milli) * kWhole / c.node->cpu_milli_total;
    return -left;
  }
  void NormalizeScore(std::vector<int64_t>& scores) override {
    if (!shares_) ScorePlugin::NormalizeScore(scores);
  }

 private:
  bool shares_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<Plugin>> NewBestFit(const nlohmann::json& args) {
  bool shares = false;
  if (!args.is_null()) {
    if (!args.is_object()) return absl::InvalidArgumentError("plugin BestFit: args must be an object");
    for (const auto& [key, value] : args.items()) {
      if (key != "of") return absl::InvalidArgumentError(absl::StrCat("plugin BestFit: unknown arg '", key, "' (of)"));
      if (!value.is_string() || (value != "devices" && value != "shares")) {
        return absl::InvalidArgumentError("plugin BestFit: of must be \"devices\" or \"shares\"");
      }
      shares = value == "shares";
    }
  }
  return std::shared_ptr<Plugin>(std::make_shared<BestFit>(shares));
}

}  // namespace hetpool::scheduler::plugins
