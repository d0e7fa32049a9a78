// Score + Reserve Fgd (FGD, ATC '23): place where the expected fragmentation of the node, against
// the mix of shapes recently placed, grows least. The mix is the last `window` placements
// (Reserve adds one, Unreserve takes it back). Scores are the paper's integer levels (FgdScore),
// kept as they are: min-max over one call would turn a one-milli difference into the whole
// 0..100 range.
#include <algorithm>
#include <deque>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "scheduler/fragmentation.h"
#include "scheduler/plugins/factories.h"

namespace hetpool::scheduler::plugins {
namespace {

class Fgd final : public ScorePlugin, public ReservePlugin {
 public:
  explicit Fgd(size_t window) : window_(window) {}
  absl::string_view Name() const override { return "Fgd"; }
  bool NeedsDeviceSelection() const override { return true; }

  int64_t Score(CycleState& state, const NodeCandidate& c) override {
    if (history_.empty()) return FgdScore(0);
    if (!measure_) measure_.emplace(Workload());
    GpuNodeState before;
    for (const DeviceView& dv : c.node->devices) {
      if (dv.device->vendor != c.vendor || before.gpus == kMaxGpusPerNode) continue;
      const bool usable = dv.device->healthy && (dv.free || dv.milli_free > 0);
      before.gpu_milli_left[static_cast<size_t>(before.gpus++)] = usable ? (dv.free ? 1000 : dv.milli_free) : 0;
    }
    before.cpu_milli_left = 1 << 30;  // CPU and host memory are not modelled here
    before.memory_mib_left = 1 << 30;
    GpuNodeState after = before;
    int slot = 0;
    for (const DeviceView& dv : c.node->devices) {
      if (dv.device->vendor != c.vendor || slot == kMaxGpusPerNode) continue;
      if (std::find(c.chosen.begin(), c.chosen.end(), &dv) != c.chosen.end()) {
        int32_t& left = after.gpu_milli_left[static_cast<size_t>(slot)];
        left = std::max(0, left - (state.request.Fractional() ? state.request.device_milli : 1000));
      }
      ++slot;
    }
    return FgdScore(measure_->Of(after) - measure_->Of(before));
  }
  void NormalizeScore(std::vector<int64_t>&) override {}

  void Reserve(const PlacementRequest& r, const Placement&) override {
    if (r.devices_per_node == 0) return;
    history_.push_back(ShapeOf(r));
    if (history_.size() > window_) history_.pop_front();
    measure_.reset();  // the mix changed
  }
  void Unreserve(const PlacementRequest& r, const Placement&) override {
    auto it = std::find(history_.rbegin(), history_.rend(), ShapeOf(r));
    if (it != history_.rend()) history_.erase(std::next(it).base());
    measure_.reset();
  }

 private:
  static std::pair<int, int32_t> ShapeOf(const PlacementRequest& r) {
    return r.Fractional() ? std::make_pair(1, r.device_milli) : std::make_pair(r.devices_per_node, int32_t{1000});
  }
  std::vector<TaskShape> Workload() const {
    std::map<std::pair<int, int32_t>, int> counts;
    for (const auto& s : history_) ++counts[s];
    std::vector<TaskShape> out;
    for (const auto& [shape, n] : counts) {
      TaskShape t;
      t.num_gpu = shape.first;
      t.gpu_milli = shape.second;
      t.weight = static_cast<double>(n) / static_cast<double>(history_.size());
      out.push_back(t);
    }
    return out;
  }
  size_t window_;
  std::deque<std::pair<int, int32_t>> history_;
  std::optional<ExpectedFragmentation> measure_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<Plugin>> NewFgd(const nlohmann::json& args) {
  size_t window = 500;
  if (!args.is_null()) {
    if (!args.is_object()) return absl::InvalidArgumentError("plugin Fgd: args must be an object");
    for (const auto& [key, value] : args.items()) {
      if (key != "window") return absl::InvalidArgumentError(absl::StrCat("plugin Fgd: unknown arg '", key, "'"));
      if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > 100000) {
        return absl::InvalidArgumentError("plugin Fgd: window must be an integer in 1..100000");
      }
      window = value.get<size_t>();
    }
  }
  return std::shared_ptr<Plugin>(std::make_shared<Fgd>(window));
}

}  // namespace hetpool::scheduler::plugins
