#include "scheduler/plugins/builtin.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <map>

#include "absl/strings/str_cat.h"
#include "scheduler/fragmentation.h"

namespace hetpool::scheduler {
namespace {

class RequestShape final : public PreFilterPlugin {
 public:
  absl::string_view Name() const override { return "RequestShape"; }
  absl::Status PreFilter(CycleState& state) override {
    const PlacementRequest& r = state.request;
    if (r.nnodes < 1) return absl::FailedPreconditionError("a job needs at least one node");
    if (r.devices_per_node > kMaxDevicesPerNodeRequest) {
      return absl::FailedPreconditionError(absl::StrCat("no node has ", r.devices_per_node, " devices"));
    }
    return absl::OkStatus();
  }

 private:
  static constexpr int kMaxDevicesPerNodeRequest = 64;
};

class Fingerprint final : public DeviceFilterPlugin {
 public:
  absl::string_view Name() const override { return "Fingerprint"; }
  std::optional<FilterVerdict> FilterDevice(CycleState& state, const NodeView&, const DeviceView& dv) override {
    const drivers::CanRunResult& verdict = state.qualify.Get(*dv.device);
    if (verdict.compatibility != drivers::Compatibility::kNo) return std::nullopt;
    return FilterVerdict{Rejection::kNever, verdict.reason};
  }
};

class NodeSchedulable final : public NodeFilterPlugin {
 public:
  absl::string_view Name() const override { return "NodeSchedulable"; }
  std::optional<FilterVerdict> FilterNode(CycleState&, const NodeView& node) override {
    if (node.schedulable) return std::nullopt;
    return FilterVerdict{Rejection::kWaiting, "node not ready or drained"};
  }
};

class DeviceHealth final : public DeviceFilterPlugin {
 public:
  absl::string_view Name() const override { return "DeviceHealth"; }
  std::optional<FilterVerdict> FilterDevice(CycleState&, const NodeView&, const DeviceView& dv) override {
    if (dv.device->healthy) return std::nullopt;
    return FilterVerdict{Rejection::kWaiting, dv.device->health_message};
  }
};

class Capacity final : public DeviceFilterPlugin {
 public:
  absl::string_view Name() const override { return "Capacity"; }
  std::optional<FilterVerdict> FilterDevice(CycleState& state, const NodeView&, const DeviceView& dv) override {
    const PlacementRequest& r = state.request;
    if (r.Fractional() && MemoryHeld(r, *dv.device) > dv.device->memory_mib) {
      return FilterVerdict{Rejection::kNever, absl::StrCat("share needs ", MemoryHeld(r, *dv.device), " MiB of a ",
                                                           dv.device->memory_mib, " MiB device")};
    }
    const bool fits = r.Fractional() ? dv.milli_free >= r.device_milli && dv.memory_free_mib >= MemoryHeld(r, *dv.device)
                                     : dv.free;
    if (fits) return std::nullopt;
    return FilterVerdict{Rejection::kWaiting, "in use"};
  }
};

// What a placement leaves on the node: free devices (whole jobs) or milli on the chosen device.
int64_t LeftAfter(const PlacementRequest& r, const NodeCandidate& c) {
  if (r.Fractional()) {  // on the device best fit would take: the least share left that fits
    int32_t least = kWholeGpuMilli;
    for (const DeviceView* dv : c.fitting) least = std::min(least, dv->milli_free);
    return least - r.device_milli;
  }
  return static_cast<int64_t>(c.fitting.size()) - r.devices_per_node;
}

class BestFit final : public ScorePlugin {
 public:
  absl::string_view Name() const override { return "BestFit"; }
  int64_t Score(CycleState& state, const NodeCandidate& c) override { return -LeftAfter(state.request, c); }
};

class Spread final : public ScorePlugin {
 public:
  absl::string_view Name() const override { return "Spread"; }
  int64_t Score(CycleState& state, const NodeCandidate& c) override { return LeftAfter(state.request, c); }
};

class LinkScorePlugin final : public ScorePlugin {
 public:
  absl::string_view Name() const override { return "LinkScore"; }
  bool NeedsDeviceSelection() const override { return true; }
  int64_t Score(CycleState&, const NodeCandidate& c) override { return c.link_score; }
};

// FGD (ATC '23): place where the expected fragmentation of the node, against the mix of shapes
// recently placed, grows least. The mix is the last `window` placements (Reserve adds one).
// Scores are the paper's integer levels (FgdScore), kept as they are: min-max over one call would
// turn a one-milli difference into the whole 0..100 range.
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

absl::Status NoArgs(const std::string& name, const nlohmann::json& args) {
  if (args.is_null() || (args.is_object() && args.empty())) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("plugin ", name, " takes no args"));
}

using Factory = std::function<absl::StatusOr<std::shared_ptr<Plugin>>(const nlohmann::json&)>;

template <typename T>
Factory Simple(const std::string& name) {
  return [name](const nlohmann::json& args) -> absl::StatusOr<std::shared_ptr<Plugin>> {
    if (absl::Status s = NoArgs(name, args); !s.ok()) return s;
    return std::shared_ptr<Plugin>(std::make_shared<T>());
  };
}

const std::map<std::string, Factory>& Registry() {
  static const auto* registry = new std::map<std::string, Factory>{
      {"RequestShape", Simple<RequestShape>("RequestShape")},
      {"Fingerprint", Simple<Fingerprint>("Fingerprint")},
      {"NodeSchedulable", Simple<NodeSchedulable>("NodeSchedulable")},
      {"DeviceHealth", Simple<DeviceHealth>("DeviceHealth")},
      {"Capacity", Simple<Capacity>("Capacity")},
      {"BestFit", Simple<BestFit>("BestFit")},
      {"Spread", Simple<Spread>("Spread")},
      {"LinkScore", Simple<LinkScorePlugin>("LinkScore")},
      {"Gang", Simple<Gang>("Gang")},
      {"Fgd",
       [](const nlohmann::json& args) -> absl::StatusOr<std::shared_ptr<Plugin>> {
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
       }},
  };
  return *registry;
}

}  // namespace

absl::StatusOr<std::shared_ptr<Plugin>> MakeBuiltinPlugin(const std::string& name, const nlohmann::json& args) {
  auto it = Registry().find(name);
  if (it == Registry().end()) return absl::NotFoundError(absl::StrCat("unknown plugin '", name, "'"));
  return it->second(args);
}

std::vector<std::string> BuiltinPluginNames() {
  std::vector<std::string> out;
  for (const auto& [name, factory] : Registry()) out.push_back(name);
  return out;
}

}  // namespace hetpool::scheduler
