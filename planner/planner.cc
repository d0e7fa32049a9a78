#include "planner/planner.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "drivers/fingerprint/spec_table.h"

namespace hetpool::planner {
namespace {

bool Has(const PoolClass& cls, Precision p) { return cls.example.capability.precisions.contains(p); }

// The precision the card's matmuls run in. Weight-only int8/int4 dequantises into 16-bit
// matmuls (the usual serving kernels), so it needs and uses a 16-bit fast path.
std::optional<Precision> ComputePrecision(const PoolClass& cls, const Workload& w) {
  const bool weight_only = w.precision == Precision::kInt8 || w.precision == Precision::kInt4;
  if (!weight_only) return Has(cls, w.precision) ? std::optional(w.precision) : std::nullopt;
  if (Has(cls, Precision::kBf16)) return Precision::kBf16;
  if (Has(cls, Precision::kFp16)) return Precision::kFp16;
  return std::nullopt;
}

double PeakFlops(const PoolClass& cls, Precision p) {
  const auto& peaks = cls.example.capability.peak_tflops;
  auto it = peaks.find(p);
  return it == peaks.end() ? 0 : it->second * 1e12;
}

}  // namespace

double RingAllReduceSeconds(double bytes, int ranks, double bytes_per_s, double latency_s) {
  if (ranks <= 1 || bytes_per_s <= 0) return 0;
  const double n = ranks;
  return 2 * (n - 1) * latency_s + 2 * (n - 1) / n * bytes / bytes_per_s;
}

double TokensPerStep(const Workload& w, const Layout& l) {
  if (w.mode == Mode::kInfer) return static_cast<double>(w.batch) * l.dp;
  return static_cast<double>(w.micro_batch) * w.seq * w.grad_accum * l.dp;
}

namespace {

struct ClassFigures {
  const ClassPricing* row = nullptr;  // the table's row for the class, if any
  double bandwidth_utilisation = 0;
  double reserve_bytes = 0;
  double price = 0;
  double network_bytes_per_s = 0;  // per card, across nodes
  double pcie_bytes_per_s = 0;
  double fabric_bytes_per_s = 0;  // 0 = no fabric
};

ClassFigures FiguresFor(const PoolClass& cls, const PriceTable& prices) {
  ClassFigures f;
  const ClassPricing* row = prices.Find(cls);
  f.row = row;
  f.bandwidth_utilisation =
      row && row->bandwidth_utilisation ? *row->bandwidth_utilisation : DefaultBandwidthUtilisation();
  f.reserve_bytes = (row && row->reserve_gib ? *row->reserve_gib : DefaultReserveGib(cls.example.vendor)) * kGiB;
  f.price = row ? row->price_per_card_hour : 0;
  f.network_bytes_per_s = (row && row->network_gbytes_per_s ? *row->network_gbytes_per_s : DefaultNetworkGBps()) * 1e9;
  f.pcie_bytes_per_s = (row && row->pcie_gbytes_per_s ? *row->pcie_gbytes_per_s : DefaultPcieGBps()) * 1e9;
  f.fabric_bytes_per_s = cls.FabricBandwidth() * 1e9;
  return f;
}

// ZeRO shards over data-parallel ranks; with one replica there is nothing to shard over.
int EffectiveZeroStage(const Workload& w, const Layout& l) {
  return w.mode == Mode::kTrain && l.dp > 1 ? w.zero_stage : 0;
}

// One link a collective runs over: bandwidth one way per card and the latency of one step.
struct LinkSpeed {
  double bytes_per_s = 0;
  double latency_s = 0;
};

// Ring all-reduce of `bytes` over `ranks` ranks: 2 (n - 1) / n of the data crosses each link,
// in 2 (n - 1) latency-bound steps (the NCCL/CNCL ring; the tree only helps latency at scale).
double AllReduceSeconds(double bytes, int ranks, const LinkSpeed& link) {
  return RingAllReduceSeconds(bytes, ranks, link.bytes_per_s, link.latency_s);
}

// Tensor-parallel ranks sit in one node: on the fabric when the link group holds them, else PCIe.
LinkSpeed TensorLink(const Layout& l, const PoolClass& cls, const ClassFigures& fig) {
  if (fig.fabric_bytes_per_s > 0 && l.tp <= cls.LargestLinkGroup()) return {fig.fabric_bytes_per_s, 10e-6};
  return {fig.pcie_bytes_per_s, 20e-6};
}

// Data-parallel rings cross nodes when the job does; inside one node they use the node's links.
LinkSpeed DataLink(const Layout& l, const PoolClass& cls, const ClassFigures& fig) {
  if (l.Devices() > std::max(1, cls.MaxPerNode())) return {fig.network_bytes_per_s, 30e-6};
  if (fig.fabric_bytes_per_s > 0 && l.Devices() <= cls.LargestLinkGroup()) return {fig.fabric_bytes_per_s, 10e-6};
  return {fig.pcie_bytes_per_s, 20e-6};
}

// Weight bytes one decode step reads: a MoE layer reads only the experts its batch's tokens were
// routed to: each of E experts is missed by all b tokens with probability (1 - k/E)^b.
double DecodeWeightBytes(const ModelSpec& m, const Workload& w, const Layout& l, const MemoryBreakdown& mem) {
  if (!m.IsMoe() || m.experts <= m.experts_per_token) return mem.weights;
  const int64_t last = m.layers - 1;
  const double layers = std::ceil(static_cast<double>(m.layers - m.dense_layers) / l.pp);
  // (E - k) experts' parameters per layer, hence one expert's.
  const double one_expert = static_cast<double>(m.LayerParams(last, false) - m.LayerParams(last, true)) /
                            static_cast<double>(m.experts - m.experts_per_token) / l.tp;
  const double all_experts_bytes = layers * m.experts * one_expert * StoredBytesPer(w.precision);
  const double touched = 1 - std::pow(1 - static_cast<double>(m.experts_per_token) / m.experts, w.batch);
  return mem.weights - all_experts_bytes * (1 - touched);
}

struct StepTime {
  double seconds = 0;  // 0 = unknown
  double comm = 0;     // of which collectives left exposed
};

// Seconds per step: compute (compute_time.h), stretched by the pipeline bubble (m micro-batches
// over p stages run m / (m + p - 1) of the time), plus what communication adds:
//  - tensor parallelism: 4 all-reduces of the layer's activations per layer and micro-batch in
//    training (2 forward, 2 backward; Megatron), 2 per layer and decode step; on the critical path;
//  - data parallelism: the gradient all-reduce once a step, overlapped with backward (ZeRO-3:
//    reduce-scatter plus the forward and backward all-gathers of the weights for every
//    micro-batch, prefetched behind the whole step), so only what outlasts it counts.
// Decode is also bounded by reading the weights (the routed experts') and the KV cache once per step.
StepTime StepSeconds(const ModelSpec& m, const Workload& w, const Layout& l, const PoolClass& cls, Precision compute,
                     const ClassFigures& fig, const MemoryBreakdown& mem) {
  const double peak = PeakFlops(cls, compute);
  if (peak <= 0) return {};
  const double compute_s =
      ComputeSeconds(ComputeModelFor(cls, peak, fig.row), m, w, TokensPerStep(w, l), 1.0, l.Devices());
  const double layers = std::ceil(static_cast<double>(m.layers) / l.pp);
  const LinkSpeed tensor_link = TensorLink(l, cls, fig);
  const double e = w.precision == Precision::kFp32 || w.precision == Precision::kTf32 ? 4 : 2;  // activations
  StepTime t;
  if (w.mode == Mode::kTrain) {
    const double micro = static_cast<double>(w.grad_accum);
    const double bubble = (micro + l.pp - 1) / micro;
    const double activation = static_cast<double>(w.seq) * w.micro_batch * m.hidden * e;
    const double tensor = layers * 4 * micro * AllReduceSeconds(activation, l.tp, tensor_link);
    // Gradients of this rank's share of the model, in their own type (fp32 under autocast).
    const double grad_e = w.mixed == MixedPrecision::kAutocast ? 4 : e;
    const double grads_bytes = static_cast<double>(TrainableParams(m, w)) / (l.tp * l.pp) * grad_e;
    const LinkSpeed data_link = DataLink(l, cls, fig);
    double data = AllReduceSeconds(grads_bytes, l.dp, data_link);
    double hidden_behind = compute_s * 2 / 3;
    if (EffectiveZeroStage(w, l) == 3) {
      // Every micro-batch gathers the weights for its forward and its backward and
      // reduce-scatters its gradients: 1.5 all-reduces' traffic each, prefetched behind the step.
      data = 1.5 * micro * data;
      hidden_behind = compute_s;
    }
    t.comm = tensor * bubble + std::max(0.0, data - hidden_behind);
    t.seconds = compute_s * bubble + t.comm;
    return t;
  }
  t.comm = l.pp * layers * 2 * AllReduceSeconds(static_cast<double>(w.batch) * m.hidden * e, l.tp, tensor_link);
  // Decode is bounded by reading the weights and cache: without the card's memory bandwidth
  // (the C500's is not published) the step is unknown, not the compute alone.
  const double bandwidth = cls.example.capability.bandwidth_gbps * 1e9 * fig.bandwidth_utilisation;
  if (bandwidth <= 0) return {};
  // Each pipeline stage reads its weights and cache in turn; tensor ranks read in parallel.
  const double bytes = (DecodeWeightBytes(m, w, l, mem) + mem.kv_cache) * l.pp;
  t.seconds = std::max(compute_s, bytes / bandwidth) + t.comm;
  return t;
}

std::vector<int> Divisors(int n) {
  std::vector<int> out;
  for (int d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(d);
  }
  return out;
}

double SecondsPerTokenOf(double step_seconds, const Workload& w, const Layout& l) {
  return step_seconds > 0 ? step_seconds / TokensPerStep(w, l) : std::numeric_limits<double>::infinity();
}

// Device counts a class can lay out: up to one node, or whole nodes.
std::vector<int> CandidateCounts(const PoolClass& cls, int fixed) {
  if (fixed > 0) return {fixed};
  std::vector<int> out;
  const int per_node = std::max(1, cls.MaxPerNode());
  for (int n = 1; n <= per_node; ++n) out.push_back(n);
  const int whole_nodes = static_cast<int>(cls.nodes.size());
  for (int k = 2; k <= whole_nodes; ++k) out.push_back(k * per_node);
  return out;
}

bool AvailableNow(const PoolClass& cls, int devices) {
  const int per_node = cls.MaxPerNode();
  if (devices <= per_node) {
    return std::any_of(cls.nodes.begin(), cls.nodes.end(), [&](const NodeCapacity& n) { return n.free >= devices; });
  }
  const int whole = static_cast<int>(std::count_if(cls.nodes.begin(), cls.nodes.end(), [&](const NodeCapacity& n) {
    return n.devices == per_node && n.free == per_node;
  }));
  return whole * per_node >= devices;
}

// The row every plan of a class starts from: the class's figures, and why nothing can run when
// the cards lack the precision.
Plan ClassRow(const PoolClass& cls, const ClassFigures& fig) {
  Plan plan;
  plan.fingerprint = cls.fingerprint;
  plan.label = cls.label;
  plan.class_total = cls.Total();
  plan.class_free = cls.Free();
  plan.card_bytes = static_cast<double>(cls.example.memory_mib) * 1024 * 1024;
  plan.price_per_card_hour = fig.price;
  return plan;
}

// One layout on one class: memory per card with margin and reserve, whether it fits, and (when
// it does) the step time.
Plan EvaluateLayout(const Plan& row, const PlanRequest& req, const PoolClass& cls, const PriceTable& prices,
                    const ClassFigures& fig, Precision compute, const Layout& layout) {
  Plan c = row;
  c.layout = layout;
  const Workload w = AsPlanned(req.workload, c);
  if (w.mode == Mode::kTrain) c.grad_accum = w.grad_accum;
  c.zero_stage = EffectiveZeroStage(w, layout);
  c.memory = EstimateMemory(req.model, w, layout);
  c.memory.allocator = c.memory.activations * AllocatorSlackFraction(w, cls.example.vendor);
  // The margin covers the estimate's error (the sizing validation holds it within 10%); the
  // allocator's slack and the runtime's reserve come on top.
  c.required_bytes = c.memory.Total() * (1 + prices.memory_margin) + c.memory.allocator + fig.reserve_bytes;
  if (c.required_bytes > c.card_bytes) return c;
  c.feasible = true;
  const StepTime step = StepSeconds(req.model, w, layout, cls, compute, fig, c.memory);
  c.step_seconds = step.seconds, c.comm_seconds = step.comm;
  return c;
}

// What a chosen layout adds: nodes, notes, time for the budget, cost, whether it can start now.
void Finish(Plan& p, const PlanRequest& req, const PoolClass& cls, Precision compute) {
  const Workload w = AsPlanned(req.workload, p);
  const int n = p.layout.Devices();
  const int per_node = std::max(1, cls.MaxPerNode());
  p.nodes = n <= per_node ? 1 : (n + per_node - 1) / per_node;
  p.devices_per_node = n <= per_node ? n : per_node;
  if (p.layout.tp > 1 && cls.LargestLinkGroup() <= 1) p.reason = "tensor parallel over PCIe (no fabric links)";
  if (p.comm_seconds > 0.2 * p.step_seconds) {
    p.reason = absl::StrCat(p.reason, p.reason.empty() ? "" : "; ",
                            absl::StrFormat("communication %.0f%% of the step", 100 * p.comm_seconds / p.step_seconds));
  }
  if (p.step_seconds <= 0) {
    const bool no_bandwidth = PeakFlops(cls, compute) > 0 && w.mode == Mode::kInfer;
    p.reason = absl::StrCat(p.reason, p.reason.empty() ? "" : "; ",
                            no_bandwidth ? "no memory bandwidth in the spec table: decode time and cost unknown"
                                         : absl::StrCat("no ", drivers::PrecisionName(compute),
                                                        " peak in the spec table: time and cost unknown"));
  }
  if (p.step_seconds > 0 && w.tokens > 0) p.total_seconds = p.step_seconds * w.tokens / TokensPerStep(w, p.layout);
  if (p.total_seconds > 0 && p.price_per_card_hour > 0) p.cost = p.total_seconds / 3600 * n * p.price_per_card_hour;
  p.available_now = AvailableNow(cls, n);
}

// The largest tensor-parallel degree on the class: its link group, or without a fabric one node
// (tensor parallelism over PCIe).
int TensorParallelLimit(const PoolClass& cls) {
  const int group = cls.LargestLinkGroup();
  return group > 1 ? group : std::max(1, cls.MaxPerNode());
}

// The layout the request names, on one class: refused with the reason when the class has too
// few cards or its tensor degree leaves the link group (or, without a fabric, the node).
Plan PlanFixedLayout(const Plan& row, const PlanRequest& req, const PoolClass& cls, const PriceTable& prices,
                     const ClassFigures& fig, Precision compute, const Layout& layout) {
  Plan plan = row;
  const int tp_limit = TensorParallelLimit(cls);
  if (layout.Devices() > plan.class_total) {
    plan.reason =
        absl::StrCat(LayoutName(layout, 0), " needs ", layout.Devices(), " cards; the class has ", plan.class_total);
    return plan;
  }
  if (layout.tp > tp_limit) {
    plan.reason = absl::StrCat("TP", layout.tp, " does not fit in one ",
                               cls.LargestLinkGroup() > 1 ? "link group" : "node", " (", tp_limit, " cards)");
    return plan;
  }
  Plan p = EvaluateLayout(plan, req, cls, prices, fig, compute, layout);
  if (!p.feasible) {
    p.reason = absl::StrCat("needs ", HumanBytes(p.required_bytes), " per card (", LayoutName(layout, p.zero_stage),
                            "); a card holds ", HumanBytes(p.card_bytes));
    return p;
  }
  Finish(p, req, cls, compute);
  return p;
}

// Plans one class: the fewest cards (or exactly request.cards) with the fastest fitting layout.
Plan PlanClass(const PlanRequest& req, const PoolClass& cls, const PriceTable& prices) {
  const ModelSpec& m = req.model;
  const Workload& w = req.workload;
  const ClassFigures fig = FiguresFor(cls, prices);
  Plan plan = ClassRow(cls, fig);
  const std::optional<Precision> compute = ComputePrecision(cls, w);
  if (!compute) {
    plan.reason = absl::StrCat("cards do not support ", drivers::PrecisionName(w.precision));
    return plan;
  }
  if (req.cards > plan.class_total) {
    plan.reason = absl::StrCat(req.cards, " cards requested; the class has ", plan.class_total);
    return plan;
  }
  if (req.layout) return PlanFixedLayout(plan, req, cls, prices, fig, *compute, *req.layout);
  const int tp_limit = TensorParallelLimit(cls);

  std::optional<Plan> best;
  double least_required = std::numeric_limits<double>::infinity();
  Layout least_layout;
  for (int n : CandidateCounts(cls, req.cards)) {
    if (n > plan.class_total) break;
    for (int tp : Divisors(n)) {
      if (tp > tp_limit || m.heads % tp != 0) continue;
      for (int pp : Divisors(n / tp)) {
        if (pp > m.layers) continue;
        const Layout layout{tp, pp, n / tp / pp};
        // Serving replicas do not shrink a replica; only an explicit card count asks for them.
        if (w.mode == Mode::kInfer && layout.dp > 1 && req.cards == 0) continue;
        Plan c = EvaluateLayout(plan, req, cls, prices, fig, *compute, layout);
        if (c.required_bytes < least_required) least_required = c.required_bytes, least_layout = layout;
        if (!c.feasible) continue;
        // Layouts of one card count differ in tokens per step (data parallelism multiplies
        // them), so they are compared by time per token, not per step.
        const double per_token = SecondsPerToken(c, w);
        const double best_per_token = best ? SecondsPerToken(*best, w) : 0;
        const bool better = !best || per_token < best_per_token * 0.999 ||
                            (per_token <= best_per_token * 1.001 && c.required_bytes < best->required_bytes);
        if (better) best = std::move(c);
      }
    }
    if (best) break;
  }
  if (!best) {
    plan.reason = absl::StrCat("needs ", HumanBytes(least_required), " per card at best (",
                               LayoutName(least_layout, EffectiveZeroStage(w, least_layout)), " on ",
                               least_layout.Devices(), " cards); a card holds ", HumanBytes(plan.card_bytes));
    return plan;
  }
  Finish(*best, req, cls, *compute);
  return *best;
}

// Cost per token, for ranking when no budget is given (same order as the cost of a budget).
double CostPerToken(const Plan& p, const Workload& w) {
  if (p.step_seconds <= 0 || p.price_per_card_hour <= 0) return std::numeric_limits<double>::infinity();
  return p.step_seconds / 3600 * p.layout.Devices() * p.price_per_card_hour / TokensPerStep(AsPlanned(w, p), p.layout);
}

// What the ranking rests on: a key whose values are all unknown ranks nothing, and the next one
// known does; the reader is told which.
std::string RankedBy(Objective objective, const std::vector<Plan>& plans) {
  bool priced = false, timed = false, any = false;
  for (const Plan& p : plans) {
    if (!p.feasible) continue;
    any = true;
    timed = timed || p.step_seconds > 0;
    priced = priced || (p.step_seconds > 0 && p.price_per_card_hour > 0);
  }
  if (!any) return std::string(ObjectiveName(objective));  // nothing to rank
  const std::string speed = timed ? "time per token" : "the pool's order (no speed known for these cards)";
  switch (objective) {
    case Objective::kCost:
      return priced ? "cost per token" : absl::StrCat(speed, "; no prices (hetpoold --prices, or --prices offline)");
    case Objective::kTime: return speed;
    case Objective::kNow: return absl::StrCat("what free cards can start now, then ", speed);
  }
  return speed;
}

std::string ClosestSummary(const PlanRequest& req, const std::vector<PoolClass>& classes) {
  Layout one;
  Workload w = req.workload;
  w.zero_stage = 0;
  const MemoryBreakdown whole = EstimateMemory(req.model, w, one);
  const double state = whole.weights + whole.gradients + whole.optimizer + whole.master + whole.kv_cache;
  double best_group = 0, best_class = 0;
  std::string group_text, class_text;
  for (const PoolClass& cls : classes) {
    const double card = static_cast<double>(cls.example.memory_mib) * 1024 * 1024;
    for (const NodeCapacity& node : cls.nodes) {
      if (node.largest_link_group * card > best_group) {
        best_group = node.largest_link_group * card;
        group_text = absl::StrCat(node.largest_link_group, " x ", cls.label, " on ", node.node);
      }
    }
    if (cls.Total() * card > best_class) {
      best_class = cls.Total() * card;
      class_text = absl::StrCat(cls.Total(), " x ", cls.label);
    }
  }
  return absl::StrCat("needs ", HumanBytes(state), " of ",
                      req.workload.mode == Mode::kTrain ? "model state" : "weights and KV cache",
                      " before activations; the largest link group holds ", HumanBytes(best_group), " (", group_text,
                      "), the largest class ", HumanBytes(best_class), " (", class_text, ")");
}

}  // namespace

double SecondsPerToken(const Plan& p, const Workload& w) {
  return SecondsPerTokenOf(p.step_seconds, AsPlanned(w, p), p.layout);
}

int64_t GradAccumFor(const Workload& w, const Layout& l) {
  if (w.mode != Mode::kTrain || w.global_batch_tokens <= 0) return w.grad_accum;
  const int64_t per_micro_batch = std::max<int64_t>(1, w.micro_batch * w.seq * l.dp);
  return std::max<int64_t>(1, w.global_batch_tokens / per_micro_batch);
}

Workload AsPlanned(const Workload& w, const Plan& p) {
  Workload planned = w;
  planned.grad_accum = GradAccumFor(w, p.layout);
  return planned;
}

int64_t DefaultGlobalBatchTokens(const ModelSpec& m) {
  const int64_t params = m.TotalParams();
  if (params < 1'000'000'000) return 1 << 19;
  if (params < 6'000'000'000) return 1 << 20;
  return 1 << 22;
}

absl::StatusOr<Objective> ParseObjective(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "cost" || lower.empty()) return Objective::kCost;
  if (lower == "time") return Objective::kTime;
  if (lower == "now") return Objective::kNow;
  return absl::InvalidArgumentError(absl::StrCat("unknown objective '", name, "' (cost, time, now)"));
}

absl::string_view ObjectiveName(Objective objective) {
  switch (objective) {
    case Objective::kCost: return "cost";
    case Objective::kTime: return "time";
    case Objective::kNow: return "now";
  }
  return "cost";
}

namespace {

absl::Status ValidateLayout(const Layout& layout, const ModelSpec& model) {
  constexpr int kMaxDegree = 1 << 20;
  if (layout.tp < 1 || layout.pp < 1 || layout.dp < 1 || layout.tp > kMaxDegree || layout.pp > kMaxDegree ||
      layout.dp > kMaxDegree || int64_t{layout.tp} * layout.pp * layout.dp > kMaxDegree) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout: tensor, pipeline and data degrees must be at least 1, and use at most 1048576 cards (",
                     LayoutName(layout, 0), ")"));
  }
  if (model.heads % layout.tp != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout: TP", layout.tp, " does not divide the ", model.heads, " heads"));
  }
  if (layout.pp > model.layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout: PP", layout.pp, " has more stages than the ", model.layers, " layers"));
  }
  return absl::OkStatus();
}

}  // namespace

std::string LayoutName(const Layout& l, int zero_stage) {
  std::string s = absl::StrCat("TP", l.tp, " PP", l.pp, " DP", l.dp);
  if (zero_stage > 0) absl::StrAppend(&s, " ZeRO-", zero_stage);
  return s;
}

std::string HumanBytes(double bytes) {
  if (bytes >= 1024 * kGiB) return absl::StrFormat("%.2f TiB", bytes / (1024 * kGiB));
  if (bytes >= kGiB) return absl::StrFormat("%.1f GiB", bytes / kGiB);
  return absl::StrFormat("%.0f MiB", bytes / (1024 * 1024));
}

absl::StatusOr<PlanResult> MakePlan(const PlanRequest& req, const std::vector<PoolClass>& classes,
                                    const PriceTable& prices) {
  if (absl::Status s = Validate(req.model); !s.ok()) return s;
  if (absl::Status s = Validate(req.workload); !s.ok()) return s;
  if (req.cards < 0 || req.cards > 1 << 20) {
    return absl::InvalidArgumentError(absl::StrCat("cards must be between 0 and 1048576 (got ", req.cards, ")"));
  }
  if (req.layout) {
    if (req.cards > 0) return absl::InvalidArgumentError("give a layout or a card count, not both");
    if (absl::Status s = ValidateLayout(*req.layout, req.model); !s.ok()) return s;
  }
  if (classes.empty()) return absl::FailedPreconditionError("the pool has no healthy cards to plan on");
  const Workload& w = req.workload;
  if (std::none_of(classes.begin(), classes.end(),
                   [&](const PoolClass& c) { return ComputePrecision(c, w).has_value(); })) {
    std::vector<std::string> labels;
    for (const PoolClass& c : classes) labels.push_back(c.label);
    return absl::InvalidArgumentError(absl::StrCat("no card in the pool supports ", drivers::PrecisionName(w.precision),
                                                   " (classes: ", absl::StrJoin(labels, "; "), ")"));
  }

  PlanResult result;
  result.currency = prices.currency;
  result.total_params = req.model.TotalParams();
  result.active_params = req.model.ActiveParams();
  result.trainable_params = w.mode == Mode::kTrain ? TrainableParams(req.model, w) : 0;
  result.family = req.model.family;
  result.flops_per_token = ModelFlopsPerToken(req.model, w);
  for (const PoolClass& cls : classes) result.plans.push_back(PlanClass(req, cls, prices));

  auto key = [&](const Plan& p) {
    switch (req.objective) {
      case Objective::kCost: return std::make_tuple(0, CostPerToken(p, w), SecondsPerToken(p, w));
      case Objective::kTime: return std::make_tuple(0, SecondsPerToken(p, w), CostPerToken(p, w));
      case Objective::kNow: return std::make_tuple(p.available_now ? 0 : 1, SecondsPerToken(p, w), CostPerToken(p, w));
    }
    return std::make_tuple(0, 0.0, 0.0);
  };
  std::stable_sort(result.plans.begin(), result.plans.end(), [&](const Plan& a, const Plan& b) {
    if (a.feasible != b.feasible) return a.feasible;
    if (!a.feasible) return a.label < b.label;
    return key(a) < key(b);
  });
  result.ranked_by = RankedBy(req.objective, result.plans);

  // Cost-performance: (baseline time / time) x (baseline card price / card price).
  const Plan* baseline = nullptr;
  for (const Plan& p : result.plans) {
    if (!p.feasible || p.price_per_card_hour <= 0 || p.step_seconds <= 0) continue;
    auto cls = std::find_if(classes.begin(), classes.end(),
                            [&](const PoolClass& c) { return c.fingerprint == p.fingerprint; });
    const bool named = cls != classes.end() && MatchesClass(prices.baseline, *cls);
    if (named || (!baseline && prices.baseline.empty())) baseline = &p;
    if (named) break;
  }
  if (baseline) {
    result.baseline = baseline->label;
    const double base_time = SecondsPerToken(*baseline, w);
    for (Plan& p : result.plans) {
      if (!p.feasible || p.price_per_card_hour <= 0 || p.step_seconds <= 0) continue;
      p.cost_performance =
          (base_time / SecondsPerToken(p, w)) * (baseline->price_per_card_hour / p.price_per_card_hour);
    }
  }
  if (std::none_of(result.plans.begin(), result.plans.end(), [](const Plan& p) { return p.feasible; })) {
    result.infeasible_summary = ClosestSummary(req, classes);
  }
  return result;
}

}  // namespace hetpool::planner
