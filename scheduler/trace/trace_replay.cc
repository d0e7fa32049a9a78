#include "scheduler/trace/trace_replay.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <random>
#include <tuple>
#include <unordered_map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "scheduler/fragmentation.h"
#include "scheduler/framework/profile.h"

namespace hetpool::scheduler::trace {
namespace {

absl::StatusOr<std::vector<std::vector<std::string>>> ReadCsv(const std::string& path,
                                                              std::vector<std::string>* header) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot be read"));
  std::string line;
  if (!std::getline(in, line)) return absl::InvalidArgumentError(absl::StrCat(path, ": empty"));
  *header = absl::StrSplit(line, ',');
  std::vector<std::vector<std::string>> rows;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    rows.push_back(absl::StrSplit(line, ','));
  }
  return rows;
}

int Column(const std::vector<std::string>& header, const std::string& name) {
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return static_cast<int>(i);
  }
  return -1;
}

template <typename T>
absl::Status ParseField(const std::vector<std::string>& row, int col, T* out, const std::string& where) {
  if (col < 0 || col >= static_cast<int>(row.size()) || !absl::SimpleAtoi(row[col], out)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": bad number in column ", col));
  }
  return absl::OkStatus();
}

// The devices of trace GPUs: one model name per node, no links, memory in proportion to the share
// (16 GiB, so a share of s milli holds 16 s MiB).
constexpr uint64_t kTraceGpuMemoryMib = 16000;

// The trace cluster as the daemon would see it, and the binder that makes placements real on it.
class TracePool : public Binder {
 public:
  TracePool(const std::vector<TraceNode>& nodes, uint64_t seed) {
    // Fixed per-seed node order: score ties go to the earliest node in it.
    std::vector<const TraceNode*> order;
    for (const auto& n : nodes) order.push_back(&n);
    std::mt19937_64 order_rng(seed * 7919 + 1);
    std::shuffle(order.begin(), order.end(), order_rng);
    records_.resize(order.size());
    for (size_t i = 0; i < order.size(); ++i) {
      const TraceNode& n = *order[i];
      for (int g = 0; g < n.gpus; ++g) {
        DeviceRecord d;
        d.id = absl::StrCat("gpu", g);
        d.index = g;
        d.vendor = Vendor::kNvidia;
        d.model = n.model;
        d.fingerprint = absl::StrCat("trace:", n.model);  // one class per model
        d.memory_mib = kTraceGpuMemoryMib;
        d.healthy = true;
        records_[i].push_back(std::move(d));
      }
      capacity_ += static_cast<int64_t>(n.gpus) * kWholeGpuMilli;
    }
    for (size_t i = 0; i < order.size(); ++i) {  // records_ no longer moves: views may point into it
      NodeView v;
      v.name = order[i]->name;
      v.schedulable = true;
      v.context.torch_devices = {"cuda"};  // every trace node runs CUDA jobs
      for (const DeviceRecord& d : records_[i]) v.devices.push_back({&d, true, kWholeGpuMilli, d.memory_mib});
      v.cpu_milli_total = v.cpu_milli_free = order[i]->cpu_milli;
      v.host_memory_total_mib = v.host_memory_free_mib = static_cast<uint64_t>(order[i]->memory_mib);
      v.generation = ++generation_;
      index_of_[v.name] = i;
      views_.push_back(std::move(v));
    }
  }
  const std::vector<NodeView>& views() const { return views_; }
  int64_t capacity_milli() const { return capacity_; }

  // What is about to be placed: the host resources Bind takes along with the devices.
  void Expect(const PlacementRequest& request) { request_ = &request; }

  absl::Status Bind(const Placement& placement) override {
    for (const NodeAssignment& a : placement.nodes) {
      NodeView& v = views_[index_of_.at(a.node)];
      TakeOnView(*request_, a, v);
      v.generation = ++generation_;
    }
    return absl::OkStatus();
  }

 private:
  std::vector<std::vector<DeviceRecord>> records_;
  std::vector<NodeView> views_;
  std::unordered_map<std::string, size_t> index_of_;
  uint64_t generation_ = 0;
  int64_t capacity_ = 0;
  const PlacementRequest* request_ = nullptr;
};

PlacementRequest RequestOf(const TracePod& p) {
  PlacementRequest r;
  r.nnodes = 1;
  r.cpu_milli = p.cpu_milli;
  r.host_memory_mib = static_cast<uint64_t>(std::max<int64_t>(0, p.memory_mib));
  if (p.num_gpu == 0) return r;  // a CPU job
  r.devices_per_node = p.num_gpu;
  r.device_milli = std::min(p.gpu_milli, kWholeGpuMilli);
  r.requirements.models = p.gpu_spec;
  return r;
}

// The trace's typical shapes (the paper's "typical pods"): the most popular, `step` at a time
// until they cover `pct` percent of the pods, weighted by their counts.
std::vector<WorkloadShape> TypicalShapes(const std::vector<TracePod>& pods, double pct, int step) {
  std::map<std::tuple<int64_t, int, int32_t, std::vector<std::string>>, double> counts;
  for (const auto& p : pods) {
    std::vector<std::string> models = p.gpu_spec;
    std::sort(models.begin(), models.end());
    ++counts[{p.cpu_milli, p.num_gpu, p.num_gpu == 0 ? 0 : p.gpu_milli, models}];
  }
  std::vector<WorkloadShape> shapes;
  for (const auto& [key, count] : counts) {
    WorkloadShape s;
    std::tie(s.cpu_milli, s.devices, s.device_milli, s.models) = key;
    s.weight = count;
    shapes.push_back(std::move(s));
  }
  // Most popular first (ties by shape, so the order is deterministic), then keep the head.
  std::stable_sort(shapes.begin(), shapes.end(),
                   [](const WorkloadShape& a, const WorkloadShape& b) { return a.weight > b.weight; });
  const double wanted = pct / 100.0 * static_cast<double>(pods.size());
  double covered = 0;
  size_t keep = 0;
  while (covered < wanted && keep < shapes.size()) {
    for (int k = 0; k < std::max(1, step) && keep < shapes.size(); ++k) covered += shapes[keep++].weight;
  }
  shapes.resize(keep);
  for (auto& s : shapes) s.weight /= covered;
  return shapes;
}

// The arrivals: the pods shuffled, then inflated (or thinned) to the target demand.
std::vector<TracePod> Arrivals(std::vector<TracePod> pods, int64_t capacity, const ReplayOptions& o,
                               std::mt19937_64& rng, int64_t* demand) {
  *demand = 0;
  if (pods.empty()) return pods;
  std::shuffle(pods.begin(), pods.end(), rng);
  const std::vector<TracePod> originals = pods;
  for (const auto& p : pods) *demand += p.GpuDemand();
  const double target = o.target_demand * static_cast<double>(capacity);
  if (*demand < target) {
    std::uniform_int_distribution<size_t> pick(0, originals.size() - 1);
    while (*demand < target) {
      pods.push_back(originals[pick(rng)]);
      *demand += pods.back().GpuDemand();
    }
  } else {
    // Already past the target: drop random pods while staying at or above it.
    while (!pods.empty()) {
      std::uniform_int_distribution<size_t> pick(0, pods.size() - 1);
      const size_t i = pick(rng);
      if (static_cast<double>(*demand - pods[i].GpuDemand()) < target) break;
      *demand -= pods[i].GpuDemand();
      pods.erase(pods.begin() + static_cast<long>(i));
    }
  }
  return pods;
}

}  // namespace

absl::StatusOr<std::vector<TraceNode>> LoadNodes(const std::string& path) {
  std::vector<std::string> header;
  auto rows = ReadCsv(path, &header);
  if (!rows.ok()) return rows.status();
  const int sn = Column(header, "sn"), cpu = Column(header, "cpu_milli"), mem = Column(header, "memory_mib"),
            gpu = Column(header, "gpu"), model = Column(header, "model");
  if (sn < 0 || cpu < 0 || mem < 0 || gpu < 0 || model < 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": expected columns sn,cpu_milli,memory_mib,gpu,model"));
  }
  std::vector<TraceNode> nodes;
  for (size_t i = 0; i < rows->size(); ++i) {
    const auto& r = (*rows)[i];
    TraceNode n;
    const std::string where = absl::StrCat(path, ":", i + 2);
    n.name = r[sn];
    if (auto s = ParseField(r, cpu, &n.cpu_milli, where); !s.ok()) return s;
    if (auto s = ParseField(r, mem, &n.memory_mib, where); !s.ok()) return s;
    if (auto s = ParseField(r, gpu, &n.gpus, where); !s.ok()) return s;
    n.model = model < static_cast<int>(r.size()) ? r[model] : "";
    if (n.gpus > 0) nodes.push_back(std::move(n));  // the protocol uses GPU nodes only
  }
  return nodes;
}

absl::StatusOr<std::vector<TracePod>> LoadPods(const std::string& path) {
  std::vector<std::string> header;
  auto rows = ReadCsv(path, &header);
  if (!rows.ok()) return rows.status();
  const int name = Column(header, "name"), cpu = Column(header, "cpu_milli"), mem = Column(header, "memory_mib"),
            num = Column(header, "num_gpu"), milli = Column(header, "gpu_milli"), spec = Column(header, "gpu_spec"),
            qos = Column(header, "qos"), created = Column(header, "creation_time"),
            scheduled = Column(header, "scheduled_time"), deleted = Column(header, "deletion_time");
  if (name < 0 || cpu < 0 || mem < 0 || num < 0 || milli < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": expected columns name,cpu_milli,memory_mib,num_gpu,gpu_milli"));
  }
  std::vector<TracePod> pods;
  for (size_t i = 0; i < rows->size(); ++i) {
    const auto& r = (*rows)[i];
    TracePod p;
    const std::string where = absl::StrCat(path, ":", i + 2);
    p.name = r[name];
    if (auto s = ParseField(r, cpu, &p.cpu_milli, where); !s.ok()) return s;
    if (auto s = ParseField(r, mem, &p.memory_mib, where); !s.ok()) return s;
    if (auto s = ParseField(r, num, &p.num_gpu, where); !s.ok()) return s;
    if (auto s = ParseField(r, milli, &p.gpu_milli, where); !s.ok()) return s;
    if (p.num_gpu == 0) p.gpu_milli = 0;
    if (spec >= 0 && spec < static_cast<int>(r.size()) && !r[spec].empty()) p.gpu_spec = absl::StrSplit(r[spec], '|');
    if (qos >= 0 && qos < static_cast<int>(r.size())) p.qos = r[qos];
    for (auto [column, field] : {std::pair{created, &p.creation_time}, std::pair{scheduled, &p.scheduled_time},
                                 std::pair{deleted, &p.deletion_time}}) {
      if (column < 0 || column >= static_cast<int>(r.size()) || r[column].empty()) continue;
      if (auto s = ParseField(r, column, field, where); !s.ok()) return s;
    }
    pods.push_back(std::move(p));
  }
  return pods;
}

absl::StatusOr<ReplayResult> Replay(const std::vector<TraceNode>& nodes, const std::vector<TracePod>& pods,
                                    const ReplayOptions& options) {
  auto framework = FrameworkFromProfile(options.profile_json);
  if (!framework.ok()) return framework.status();
  (*framework)->ExpectWorkload(TypicalShapes(pods, options.typical_shapes_pct, options.typical_shapes_step));
  std::vector<TraceNode> used = nodes;
  if (options.node_limit > 0 && used.size() > options.node_limit) used.resize(options.node_limit);
  const auto start = std::chrono::steady_clock::now();
  TracePool pool(used, options.seed);
  std::mt19937_64 rng(options.seed);
  int64_t demand = 0;
  const std::vector<TracePod> arrivals = Arrivals(pods, pool.capacity_milli(), options, rng, &demand);
  ReplayResult result;
  result.pods = arrivals.size();
  result.capacity_milli = pool.capacity_milli();
  int64_t allocated = 0;
  for (const TracePod& p : arrivals) {
    const PlacementRequest request = RequestOf(p);
    pool.Expect(request);
    (*framework)->NoteSubmitted(request);
    if (!(*framework)->Schedule(request, pool.views(), pool).ok()) {
      ++result.failed;
      continue;
    }
    allocated += p.GpuDemand();
    ++result.placed;
  }
  const double capacity = static_cast<double>(std::max<int64_t>(1, pool.capacity_milli()));
  result.allocation_ratio = static_cast<double>(allocated) / capacity;
  result.demand_ratio = static_cast<double>(demand) / capacity;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace hetpool::scheduler::trace
