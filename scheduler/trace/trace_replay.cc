#include "scheduler/trace/trace_replay.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "scheduler/fragmentation.h"

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

// One placement decision: node index (in the replay's node order) and GPUs (milli taken each).
struct Choice {
  int node = -1;
  std::array<int32_t, kMaxGpusPerNode> take{};
};

class Simulator {
 public:
  Simulator(const std::vector<TraceNode>& nodes, const std::vector<TracePod>& original, const ReplayOptions& o)
      : options_(o), rng_(o.seed) {
    std::map<std::string, int> models;
    for (const auto& n : nodes) models.emplace(n.model, static_cast<int>(models.size()));
    model_ids_ = models;
    // Fixed per-seed node order: ties go to the earliest node in it.
    std::vector<const TraceNode*> order;
    for (const auto& n : nodes) order.push_back(&n);
    std::mt19937_64 order_rng(o.seed * 7919 + 1);
    std::shuffle(order.begin(), order.end(), order_rng);
    for (const TraceNode* n : order) {
      GpuNodeState s;
      s.model = models.at(n->model);
      s.gpus = std::min(n->gpus, kMaxGpusPerNode);
      s.cpu_milli_left = n->cpu_milli;
      s.memory_mib_left = n->memory_mib;
      for (int i = 0; i < s.gpus; ++i) s.gpu_milli_left[i] = kWholeGpuMilli;
      state_.push_back(s);
      cpu_total_.push_back(n->cpu_milli);
      capacity_ += static_cast<int64_t>(s.gpus) * kWholeGpuMilli;
    }
    // The workload the fragmentation measure weighs against: the trace's own mix of shapes.
    std::map<std::tuple<int64_t, int64_t, int, int32_t, uint64_t>, double> shapes;
    for (const auto& p : original) ++shapes[{p.cpu_milli, 0, p.num_gpu, p.gpu_milli, MaskOf(p)}];
    std::vector<TaskShape> workload;
    for (const auto& [k, count] : shapes) {
      TaskShape t;
      std::tie(t.cpu_milli, t.memory_mib, t.num_gpu, t.gpu_milli, t.model_mask) = k;
      t.weight = count;
      workload.push_back(t);
    }
    // Most popular first (ties by shape, so the order is deterministic), then keep the head.
    std::stable_sort(workload.begin(), workload.end(),
                     [](const TaskShape& a, const TaskShape& b) { return a.weight > b.weight; });
    const double wanted = o.typical_shapes_pct / 100.0 * static_cast<double>(original.size());
    double covered = 0;
    size_t keep = 0;
    while (covered < wanted && keep < workload.size()) {
      for (int step = 0; step < std::max(1, o.typical_shapes_step) && keep < workload.size(); ++step) covered += workload[keep++].weight;
    }
    workload.resize(keep);
    for (auto& t : workload) t.weight /= covered;
    fragmentation_ = std::make_unique<ExpectedFragmentation>(std::move(workload));
    node_frag_.assign(state_.size(), -1);
  }

  uint64_t MaskOf(const TracePod& p) const {
    uint64_t mask = 0;
    for (const auto& m : p.gpu_spec) {
      if (auto it = model_ids_.find(m); it != model_ids_.end()) mask |= 1ull << it->second;
    }
    // A constraint naming no model of this cluster can never be met: keep an impossible mask.
    if (!p.gpu_spec.empty() && mask == 0) mask = 1ull << 63;
    return mask;
  }

  ReplayResult Run(std::vector<TracePod> pods) {
    const auto start = std::chrono::steady_clock::now();
    std::shuffle(pods.begin(), pods.end(), rng_);
    const std::vector<TracePod> originals = pods;
    int64_t demand = 0;
    for (const auto& p : pods) demand += p.GpuDemand();
    const double target = options_.target_demand * static_cast<double>(capacity_);
    if (demand < target) {
      std::uniform_int_distribution<size_t> pick(0, originals.size() - 1);
      while (demand < target) {
        pods.push_back(originals[pick(rng_)]);
        demand += pods.back().GpuDemand();
      }
    } else {
      // Already past the target: drop random pods while staying at or above it.
      while (!pods.empty()) {
        std::uniform_int_distribution<size_t> pick(0, pods.size() - 1);
        const size_t i = pick(rng_);
        if (static_cast<double>(demand - pods[i].GpuDemand()) < target) break;
        demand -= pods[i].GpuDemand();
        pods.erase(pods.begin() + static_cast<long>(i));
      }
    }
    ReplayResult result;
    result.pods = pods.size();
    result.capacity_milli = capacity_;
    int64_t allocated = 0;
    for (const auto& p : pods) {
      TaskShape t{p.cpu_milli, p.memory_mib, p.num_gpu, p.gpu_milli, MaskOf(p), 0};
      Choice c = Choose(t);
      if (c.node < 0) {
        ++result.failed;
        continue;
      }
      Apply(c, t);
      allocated += p.GpuDemand();
      ++result.placed;
    }
    result.allocation_ratio = static_cast<double>(allocated) / static_cast<double>(capacity_);
    result.demand_ratio = static_cast<double>(demand) / static_cast<double>(capacity_);
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
  }

 private:
  bool FitsHost(const GpuNodeState& s, const TaskShape& t) const {
    if (s.cpu_milli_left < t.cpu_milli || s.memory_mib_left < t.memory_mib) return false;
    if (t.num_gpu == 0) return true;
    return t.AllowsModel(s.model) && GpusFit(s, t);
  }

  // The GPU options on one node: whole tasks take the lowest-index idle GPUs; a fractional task
  // may go to any GPU it fits (one option per distinct free amount, lowest index first).
  std::vector<std::array<int32_t, kMaxGpusPerNode>> Options(const GpuNodeState& s, const TaskShape& t) const {
    std::vector<std::array<int32_t, kMaxGpusPerNode>> out;
    if (t.num_gpu == 0) {
      out.push_back({});
    } else if (t.Fractional()) {
      std::vector<int32_t> seen;
      for (int i = 0; i < s.gpus; ++i) {
        const int32_t left = s.gpu_milli_left[i];
        if (left < t.gpu_milli || std::find(seen.begin(), seen.end(), left) != seen.end()) continue;
        seen.push_back(left);
        std::array<int32_t, kMaxGpusPerNode> take{};
        take[i] = t.gpu_milli;
        out.push_back(take);
      }
    } else {
      std::array<int32_t, kMaxGpusPerNode> take{};
      int need = t.num_gpu;
      for (int i = 0; i < s.gpus && need > 0; ++i) {
        if (s.gpu_milli_left[i] == kWholeGpuMilli) {
          take[i] = kWholeGpuMilli;
          --need;
        }
      }
      out.push_back(take);
    }
    return out;
  }

  static GpuNodeState After(GpuNodeState s, const std::array<int32_t, kMaxGpusPerNode>& take, const TaskShape& t) {
    s.cpu_milli_left -= t.cpu_milli;
    s.memory_mib_left -= t.memory_mib;
    for (int i = 0; i < kMaxGpusPerNode; ++i) s.gpu_milli_left[i] -= take[i];
    return s;
  }

  // Best-fit GPU for a fractional task: the fitting GPU with the least free milli.
  static std::array<int32_t, kMaxGpusPerNode> BestFitGpu(const GpuNodeState& s, const TaskShape& t,
                                                         const std::vector<std::array<int32_t, kMaxGpusPerNode>>& opts) {
    if (!t.Fractional()) return opts.front();
    size_t best = 0;
    int32_t best_left = INT32_MAX;
    for (size_t k = 0; k < opts.size(); ++k) {
      for (int i = 0; i < s.gpus; ++i) {
        if (opts[k][i] > 0 && s.gpu_milli_left[i] < best_left) {
          best_left = s.gpu_milli_left[i];
          best = k;
        }
      }
    }
    return opts[best];
  }

  Choice Choose(const TaskShape& t) {
    Choice best;
    double best_score = 0;
    std::vector<int> feasible;
    for (size_t n = 0; n < state_.size(); ++n) {
      if (FitsHost(state_[n], t)) feasible.push_back(static_cast<int>(n));
    }
    if (feasible.empty()) return best;
    if (options_.policy == Policy::kRandom) {
      std::uniform_int_distribution<size_t> pick(0, feasible.size() - 1);
      best.node = feasible[pick(rng_)];
      best.take = BestFitGpu(state_[best.node], t, Options(state_[best.node], t));
      return best;
    }
    if (options_.policy == Policy::kFgd || options_.policy == Policy::kDefault) return ChooseFgd(t, feasible);
    for (int n : feasible) {
      const GpuNodeState& s = state_[n];
      const auto opts = Options(s, t);
      const auto take = BestFitGpu(s, t, opts);
      const GpuNodeState after = After(s, take, t);
      double score;
      if (options_.policy == Policy::kBestFit) {
        // Least resources left after placement (GPU and CPU shares, equally weighted).
        const double gpu_share = s.gpus ? static_cast<double>(after.GpuMilliLeft()) / (s.gpus * kWholeGpuMilli) : 0;
        score = gpu_share + static_cast<double>(after.cpu_milli_left) / static_cast<double>(cpu_total_[n]);
      } else {
        // GPU packing: a partly used GPU first, then a node with GPUs in use, then an idle node.
        int tier = 2;
        const int64_t used = static_cast<int64_t>(s.gpus) * kWholeGpuMilli - s.GpuMilliLeft();
        if (used > 0) tier = 1;
        for (int i = 0; i < s.gpus; ++i) {
          if (take[i] > 0 && take[i] < kWholeGpuMilli && s.gpu_milli_left[i] < kWholeGpuMilli) tier = 0;
        }
        score = tier * 1e9 - static_cast<double>(used);
      }
      if (best.node < 0 || score < best_score - 1e-9) {
        best = {n, take};
        best_score = score;
      }
    }
    return best;
  }

  // FGD: the placement (node, GPUs) whose expected fragmentation grows least. Within a node the
  // best GPU option (ties: the lowest index); across nodes the best score, ties going to the
  // node earliest in the fixed order. Scores are the paper plugin's int(100 * sigmoid), raw
  // increases, or Kubernetes-style integers 0..score_levels.
  Choice ChooseFgd(const TaskShape& t, const std::vector<int>& feasible) {
    std::vector<std::pair<double, Choice>> per_node;  // best score and choice per feasible node
    per_node.reserve(feasible.size());
    for (int n : feasible) {
      const GpuNodeState& s = state_[n];
      if (node_frag_[n] < 0) node_frag_[n] = fragmentation_->Of(s);
      Choice c{-1, {}};
      double best = 0;
      for (const auto& take : Options(s, t)) {
        const double increase = fragmentation_->Of(After(s, take, t)) - node_frag_[n];
        const double score = options_.sigmoid_scores ? FgdScore(increase) : -increase;
        if (c.node < 0 || score > best + 1e-9) {
          c = {n, take};
          best = score;
        }
      }
      per_node.emplace_back(best, c);
    }
    double lo = per_node.front().first, hi = lo;
    for (const auto& [score, c] : per_node) {
      lo = std::min(lo, score);
      hi = std::max(hi, score);
    }
    Choice best;
    double best_score = 0;
    int64_t best_tie = 0;
    for (const auto& [raw, c] : per_node) {
      double score = raw;
      if (options_.score_levels > 0) {
        score = hi > lo ? std::floor((raw - lo) / (hi - lo) * options_.score_levels) : options_.score_levels;
      }
      const int64_t tie = options_.policy == Policy::kDefault ? TieRank(state_[c.node], t) : 0;
      // Strictly better only: remaining ties stay with the node earliest in the fixed order.
      const bool better = best.node < 0 || score > best_score + 1e-9 || (score > best_score - 1e-9 && tie < best_tie);
      if (better) {
        best = c;
        best_score = score;
        best_tie = tie;
      }
    }
    return best;
  }

  // hetpool's tie-break among equally scored nodes (lower first), before node order:
  //  - a CPU-only task goes where the least GPU capacity is free, so the CPU it takes strands
  //    as little GPU as possible;
  //  - a GPU task goes to a node already in use rather than open an idle one, which stays whole
  //    for the multi-GPU tasks that need it.
  static int64_t TieRank(const GpuNodeState& s, const TaskShape& t) {
    if (t.num_gpu == 0) return s.GpuMilliLeft();
    return s.GpuMilliLeft() == static_cast<int64_t>(s.gpus) * kWholeGpuMilli ? 1 : 0;
  }

  void Apply(const Choice& c, const TaskShape& t) {
    state_[c.node] = After(state_[c.node], c.take, t);
    node_frag_[c.node] = -1;
  }

  ReplayOptions options_;
  std::mt19937_64 rng_;
  std::map<std::string, int> model_ids_;
  std::vector<GpuNodeState> state_;
  std::vector<int64_t> cpu_total_;
  std::vector<double> node_frag_;  // cached expected fragmentation per node, -1 = stale
  int64_t capacity_ = 0;
  std::unique_ptr<ExpectedFragmentation> fragmentation_;
};

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
            num = Column(header, "num_gpu"), milli = Column(header, "gpu_milli"), spec = Column(header, "gpu_spec");
  if (name < 0 || cpu < 0 || mem < 0 || num < 0 || milli < 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": expected columns name,cpu_milli,memory_mib,num_gpu,gpu_milli"));
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
    pods.push_back(std::move(p));
  }
  return pods;
}

absl::StatusOr<Policy> ParsePolicy(const std::string& name) {
  if (name == "random") return Policy::kRandom;
  if (name == "bestfit") return Policy::kBestFit;
  if (name == "packing") return Policy::kPacking;
  if (name == "fgd") return Policy::kFgd;
  if (name == "default") return Policy::kDefault;
  return absl::InvalidArgumentError(absl::StrCat("unknown policy '", name, "' (random, bestfit, packing, fgd, default)"));
}

const char* PolicyName(Policy policy) {
  switch (policy) {
    case Policy::kRandom: return "random";
    case Policy::kBestFit: return "bestfit";
    case Policy::kPacking: return "packing";
    case Policy::kFgd: return "fgd";
    case Policy::kDefault: return "default";
  }
  return "?";
}

ReplayResult Replay(const std::vector<TraceNode>& nodes, const std::vector<TracePod>& pods,
                    const ReplayOptions& options) {
  std::vector<TraceNode> used = nodes;
  if (options.node_limit > 0 && used.size() > options.node_limit) used.resize(options.node_limit);
  Simulator sim(used, pods, options);
  return sim.Run(pods);
}

}  // namespace hetpool::scheduler::trace
