// Score + Reserve Fgd (FGD, ATC '23): place where the expected fragmentation of the node grows
// least, against a mix of job shapes, by "mix":
//  - "placed" (default): the last `window` placements (Reserve adds one, Unreserve takes it back);
//  - "submitted": the last `window` jobs submitted (PlacementPolicy::NoteSubmitted), placed or
//    not: as the pool fills, the shapes that no longer fit still count, so whole nodes stay
//    protected for them, which "placed" forgets;
//  - "expected": the mix declared up front (Framework::ExpectWorkload), as the paper's simulator
//    takes the trace's typical shapes; "placed" until one is declared.
// The node's host CPU counts (a GPU whose node has too little CPU left is fragment), so CPU jobs
// score too. Scores are the paper's integer levels (FgdScore), kept as they are: min-max over one
// call would turn a one-milli difference into the whole 0..100 range.
// "size_damping" d (default 0, the paper's weights): a shape asking for c cards per node weighs
// its share of the mix x (1 + c/3)^-d, renormalised (a share of a card counts its fraction).
// Measured on the trace (docs/benchmarks.md): at full weight the few 8-card shapes, for which
// every card of a partly used node is fragment, dominate the measure; damped, the many small
// shapes' fragmentation decides, and allocation rises on every workload, most on the multi-GPU
// ones.
#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "scheduler/fragmentation.h"
#include "scheduler/plugins/factories.h"

namespace hetpool::scheduler::plugins {
namespace {

// A node that reports no CPU total is not limited in it.
constexpr int64_t kUnlimited = int64_t{1} << 40;

class Fgd final : public ScorePlugin, public ReservePlugin, public WorkloadAwarePlugin {
 public:
  enum class Mix { kPlaced, kSubmitted, kExpected };
  Fgd(size_t window, Mix mix, double size_damping) : window_(window), mix_(mix), size_damping_(size_damping) {}
  absl::string_view Name() const override { return "Fgd"; }
  bool NeedsDeviceSelection() const override { return true; }

  int64_t Score(CycleState& state, const NodeCandidate& c) override {
    ExpectedFragmentation* measure = Measure();
    if (measure == nullptr) return FgdScore(0);
    const PlacementRequest& r = state.request;
    GpuNodeState before;
    before.cpu_milli_left = c.node->cpu_milli_total > 0 ? c.node->cpu_milli_free : kUnlimited;
    before.memory_mib_left = kUnlimited;  // host memory decides feasibility only (fragmentation.h)
    GpuNodeState after = before;
    after.cpu_milli_left -= r.cpu_milli;
    for (const DeviceView& dv : c.node->devices) {
      // A CPU job strands the GPUs of every vendor; a device job those of its own.
      if ((c.vendor != Vendor::kCpu && dv.device->vendor != c.vendor) || before.gpus == kMaxGpusPerNode) continue;
      if (before.gpus == 0) before.model = after.model = ModelId(dv.device->model);
      const bool usable = dv.device->Placeable() && (dv.free || dv.milli_free > 0);
      const int32_t left = usable ? (dv.free ? kWholeGpuMilli : dv.milli_free) : 0;
      const size_t slot = static_cast<size_t>(before.gpus++);
      before.gpu_milli_left[slot] = left;
      const bool chosen = std::find(c.chosen.begin(), c.chosen.end(), &dv) != c.chosen.end();
      after.gpu_milli_left[slot] =
          chosen ? std::max(0, left - (r.Fractional() ? r.device_milli : kWholeGpuMilli)) : left;
    }
    after.gpus = before.gpus;
    return FgdScore(measure->Of(after) - measure->Of(before));
  }
  void NormalizeScore(std::vector<int64_t>&) override {}

  void Reserve(const PlacementRequest& r, const Placement&) override {
    if (mix_ == Mix::kPlaced) Remember(r);
  }
  void Unreserve(const PlacementRequest& r, const Placement&) override {
    if (mix_ != Mix::kPlaced) return;
    auto it = std::find(history_.rbegin(), history_.rend(), ShapeOf(r));
    if (it != history_.rend()) {
      Uncount(*it);
      history_.erase(std::next(it).base());
    }
    if (!UsesExpected()) measure_.reset();
  }
  void NoteSubmitted(const PlacementRequest& r) override {
    if (mix_ == Mix::kSubmitted) Remember(r);
  }

  void ExpectWorkload(const std::vector<WorkloadShape>& shapes) override {
    expected_.clear();
    for (const WorkloadShape& s : shapes) {
      TaskShape t = TaskOf(s.cpu_milli, s.devices, s.device_milli, s.models);
      t.weight = s.weight;
      expected_.push_back(t);
    }
    measure_.reset();
  }

 private:
  // (CPU, devices, share, allowed models): what fragmentation tells apart.
  using Shape = std::tuple<int64_t, int, int32_t, std::string>;

  bool UsesExpected() const { return mix_ == Mix::kExpected && !expected_.empty(); }

  void Remember(const PlacementRequest& r) {
    history_.push_back(ShapeOf(r));
    ++counts_[history_.back()];
    if (history_.size() > window_) {
      Uncount(history_.front());
      history_.pop_front();
    }
    if (!UsesExpected()) measure_.reset();  // the mix changed
  }

  Shape ShapeOf(const PlacementRequest& r) const {
    const int devices = r.Fractional() ? 1 : r.devices_per_node;
    return {r.cpu_milli, devices, devices == 0 ? 0 : (r.Fractional() ? r.device_milli : kWholeGpuMilli),
            absl::StrJoin(r.requirements.models, "|")};
  }

  TaskShape TaskOf(int64_t cpu_milli, int devices, int32_t milli, const std::vector<std::string>& models) {
    TaskShape t;
    t.cpu_milli = cpu_milli;
    t.num_gpu = devices;
    t.gpu_milli = devices == 0 ? 0 : milli;
    for (const std::string& m : models) t.model_mask |= uint64_t{1} << ModelId(m);
    return t;
  }

  // Model ids for the measure's type constraints; past 63 models, the rest share the last bit.
  int ModelId(const std::string& model) {
    auto [it, added] = models_.emplace(model, static_cast<int>(std::min<size_t>(models_.size(), 63)));
    return it->second;
  }

  ExpectedFragmentation* Measure() {
    if (measure_) return &*measure_;
    std::vector<TaskShape> mix;
    if (UsesExpected()) {
      mix = expected_;
    } else {
      if (history_.empty()) return nullptr;
      // Submitted jobs name models, so the interned names grow with what users send; ids only
      // need to agree within one measure, so start them over when they are many.
      if (models_.size() > kMaxModelNames) models_.clear();
      for (const auto& [shape, n] : counts_) {
        const auto& [cpu, devices, milli, models] = shape;
        std::vector<std::string> allowed;
        if (!models.empty()) allowed = absl::StrSplit(models, '|');
        TaskShape t = TaskOf(cpu, devices, milli, allowed);
        t.weight = static_cast<double>(n) / static_cast<double>(history_.size());
        mix.push_back(t);
      }
    }
    if (size_damping_ > 0) Damp(mix);
    measure_.emplace(std::move(mix));
    return &*measure_;
  }

  // Weighs down the shapes that ask for more cards ("size_damping"); the total stays the same.
  void Damp(std::vector<TaskShape>& mix) const {
    double before = 0, after = 0;
    for (TaskShape& t : mix) {
      before += t.weight;
      const double cards = t.num_gpu * static_cast<double>(t.gpu_milli) / kWholeGpuMilli;
      t.weight *= std::pow(1.0 + cards / 3.0, -size_damping_);
      after += t.weight;
    }
    if (after <= 0) return;
    for (TaskShape& t : mix) t.weight *= before / after;
  }

  static constexpr size_t kMaxModelNames = 1024;
  size_t window_;
  Mix mix_;
  double size_damping_;

  // One shape left the window.
  void Uncount(const Shape& shape) {
    auto it = counts_.find(shape);
    if (it != counts_.end() && --it->second == 0) counts_.erase(it);
  }

  std::deque<Shape> history_;
  // How many of each shape history_ holds, kept as it changes: the measure is rebuilt after every
  // submission, and counting the whole window each time showed in the placement profile.
  std::map<Shape, int> counts_;
  std::vector<TaskShape> expected_;
  std::map<std::string, int> models_;
  std::optional<ExpectedFragmentation> measure_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<Plugin>> NewFgd(const nlohmann::json& args) {
  size_t window = 500;
  Fgd::Mix mix = Fgd::Mix::kPlaced;
  double size_damping = 0;

  if (!args.is_null()) {
    if (!args.is_object()) return absl::InvalidArgumentError("plugin Fgd: args must be an object");
    for (const auto& [key, value] : args.items()) {
      if (key == "window") {
        if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > 100000) {
          return absl::InvalidArgumentError("plugin Fgd: window must be an integer in 1..100000");
        }
        window = value.get<size_t>();
      } else if (key == "mix") {
        if (!value.is_string() || (value != "placed" && value != "submitted" && value != "expected")) {
          return absl::InvalidArgumentError("plugin Fgd: mix must be \"placed\", \"submitted\" or \"expected\"");
        }
        mix = value == "placed" ? Fgd::Mix::kPlaced : value == "submitted" ? Fgd::Mix::kSubmitted : Fgd::Mix::kExpected;
      } else if (key == "size_damping") {
        if (!value.is_number() || value.get<double>() < 0 || value.get<double>() > 8) {
          return absl::InvalidArgumentError("plugin Fgd: size_damping must be a number in 0..8");
        }
        size_damping = value.get<double>();
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("plugin Fgd: unknown arg '", key, "' (window, mix, size_damping)"));
      }
    }
  }
  return std::shared_ptr<Plugin>(std::make_shared<Fgd>(window, mix, size_damping));
}

}  // namespace hetpool::scheduler::plugins
