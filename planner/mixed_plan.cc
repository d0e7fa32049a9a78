#include "planner/mixed_plan.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "drivers/fingerprint/spec_table.h"
#include "planner/memory.h"

namespace hetpool::planner {
namespace {

constexpr double kNetworkLatency = 30e-6;

// What the price table (or the defaults) says of a class.
struct Figures {
  ComputeModel compute;  // in the training precision (peak 0 = unknown)
  double reserve_bytes = 0;
  double network_bytes_per_s = 0;
  double node_link_bytes_per_s = 0;  // tensor parallelism inside a node: the fabric, else PCIe
};

Figures FiguresOf(const PoolClass& cls, const Workload& w, const PriceTable& prices, int tp) {
  Figures f;
  const ClassPricing* row = prices.Find(cls);
  const auto& peaks = cls.example.capability.peak_tflops;
  const auto peak = peaks.find(w.precision);
  f.compute = ComputeModelFor(cls, peak == peaks.end() ? 0 : peak->second * 1e12, row);
  f.reserve_bytes = (row && row->reserve_gib ? *row->reserve_gib : DefaultReserveGib(cls.example.vendor)) * kGiB;
  f.network_bytes_per_s = (row && row->network_gbytes_per_s ? *row->network_gbytes_per_s : DefaultNetworkGBps()) * 1e9;
  const double pcie = (row && row->pcie_gbytes_per_s ? *row->pcie_gbytes_per_s : DefaultPcieGBps()) * 1e9;
  f.node_link_bytes_per_s =
      cls.FabricBandwidth() > 0 && tp <= cls.LargestLinkGroup() ? cls.FabricBandwidth() * 1e9 : pcie;
  return f;
}

double ActivationElementBytes(const Workload& w) {
  return w.precision == Precision::kFp32 || w.precision == Precision::kTf32 ? 4 : 2;
}

// A class's part of the pipeline: stages of `tp` cards (one node's tensor parallelism).
struct StageClass {
  const PoolClass* cls = nullptr;
  Figures fig;
  int tp = 1;
  int stages = 0;
  double layer_seconds = 0;           // one layer, one micro-batch: compute + its tensor-parallel all-reduces
  double layer_state_bytes = 0;       // per card: weights, gradients, optimizer, master of one layer
  double layer_activation_bytes = 0;  // per card, per micro-batch in flight
  double allocator_slack = 0;         // of the activations, what the caching allocator keeps on top
  double first_extra = 0;             // input embedding's states (the first stage)
  double last_extra = 0;              // output projection's states and the logits (the last stage)
  double card_bytes = 0;
};

// Bytes one stage's card needs for `layers` layers with `in_flight` micro-batches (1F1B).
// As the planner's rows: the estimate with its margin, the allocator's slack and the reserve.
double StageBytes(const StageClass& c, int layers, int in_flight, bool first, bool last, double margin) {
  const double activations = layers * c.layer_activation_bytes * in_flight;
  const double estimate =
      layers * c.layer_state_bytes + activations + (first ? c.first_extra : 0) + (last ? c.last_extra : 0);
  return estimate * (1 + margin) + activations * c.allocator_slack + c.fig.reserve_bytes;
}

int MaxLayers(const StageClass& c, int in_flight, bool first, bool last, double margin, int cap) {
  const double per_layer = (c.layer_state_bytes + c.layer_activation_bytes * in_flight) * (1 + margin) +
                           c.layer_activation_bytes * in_flight * c.allocator_slack;
  const double room = c.card_bytes - StageBytes(c, 0, in_flight, first, last, margin);
  if (room <= 0 || per_layer <= 0) return 0;
  return static_cast<int>(std::min<double>(cap, std::floor(room / per_layer)));
}

struct PipelineResult {
  bool feasible = false;
  std::string reason;
  MixedPlan plan;
};

// Tensor-parallel degrees a class's stages may use: inside one node, dividing its free cards and
// the heads.
std::vector<int> StageTensorDegrees(const PoolClass& cls, const ModelSpec& m) {
  std::vector<int> out;
  const int free = cls.Free();
  for (int tp = 1; tp <= std::min(free, std::max(1, cls.MaxPerNode())); ++tp) {
    if (free % tp == 0 && m.heads % tp == 0) out.push_back(tp);
  }
  return out;
}

// The pipeline with class k's stages at tensor parallelism tps[k].
PipelineResult PlanPipeline(const PlanRequest& req, const std::vector<const PoolClass*>& classes,
                            const std::vector<int>& tps, const PriceTable& prices) {
  const ModelSpec& m = req.model;
  const Workload& w = req.workload;
  PipelineResult out;
  std::vector<StageClass> parts;
  for (size_t k = 0; k < classes.size(); ++k) {
    const PoolClass* cls = classes[k];
    StageClass c;
    c.cls = cls;
    const int tp = tps[k];
    c.tp = tp;
    c.stages = cls->Free() / tp;
    c.fig = FiguresOf(*cls, w, prices, tp);
    const Layout stage{tp, 1, 1};
    const MemoryBreakdown whole = EstimateMemory(m, w, stage);
    const double states = whole.weights + whole.gradients + whole.optimizer + whole.master;
    const double total = static_cast<double>(m.TotalParams());
    const double embedding = static_cast<double>(m.EmbeddingParams());
    const double input = static_cast<double>(m.InputEmbeddingParams());
    c.layer_state_bytes = states * (1 - embedding / total) / m.layers;
    c.first_extra = states * input / total;
    c.last_extra = states * (embedding - input) / total + whole.transient;
    c.layer_activation_bytes = LayerActivationBytes(m, w, stage);
    c.allocator_slack = AllocatorSlackFraction(w, cls->example.vendor);
    c.card_bytes = static_cast<double>(cls->example.memory_mib) * 1024 * 1024;
    const double e = ActivationElementBytes(w);
    const double activation = static_cast<double>(w.seq) * w.micro_batch * m.hidden * e;
    const double tokens = static_cast<double>(w.micro_batch) * w.seq;
    // Megatron: 4 all-reduces of the layer's activations per micro-batch (2 forward, 2 backward).
    c.layer_seconds = ComputeSeconds(c.fig.compute, m, w, tokens, 1.0 / m.layers, tp) +
                      4 * RingAllReduceSeconds(activation, tp, c.fig.node_link_bytes_per_s, 10e-6);
    parts.push_back(c);
  }
  // Stages in order: the fastest class's first (the first stage holds the most micro-batches in
  // flight, and fast cards here are also the large ones more often than not).
  std::stable_sort(parts.begin(), parts.end(),
                   [](const StageClass& a, const StageClass& b) { return a.layer_seconds < b.layer_seconds; });
  struct Stage {
    size_t part;
    int max_layers = 0;
    int layers = 0;
  };
  std::vector<Stage> stages;
  for (size_t p = 0; p < parts.size(); ++p) {
    for (int s = 0; s < parts[p].stages; ++s) stages.push_back({p});
  }
  const int n = static_cast<int>(stages.size());
  // One pipeline, no data parallelism: the micro-batches are the whole global batch.
  const int micro = static_cast<int>(std::min<int64_t>(GradAccumFor(w, Layout{}), 1 << 20));
  for (int i = 0; i < n; ++i) {
    const int in_flight = std::min(n - i, micro);
    stages[i].max_layers =
        MaxLayers(parts[stages[i].part], in_flight, i == 0, i == n - 1, prices.memory_margin, m.layers);
  }
  int capacity = 0;
  for (const Stage& s : stages) capacity += s.max_layers;
  if (capacity < m.layers) {
    out.reason = absl::StrCat("pipeline across classes: the ", n, " stages hold ", capacity, " of the ", m.layers,
                              " layers in memory");
    return out;
  }
  // The least stage time T at which the stages, each taking as many layers as T and its memory
  // allow, hold the model: the balanced assignment (binary search over T).
  auto layers_within = [&](double t) {
    int total = 0;
    for (Stage& s : stages) {
      s.layers = std::min(s.max_layers, static_cast<int>(std::floor(t / parts[s.part].layer_seconds + 1e-9)));
      total += s.layers;
    }
    return total;
  };
  double lo = 0, hi = 0;
  for (const Stage& s : stages) hi = std::max(hi, parts[s.part].layer_seconds * m.layers);
  for (int it = 0; it < 100; ++it) {
    const double mid = (lo + hi) / 2;
    (layers_within(mid) >= m.layers ? hi : lo) = mid;
  }
  int assigned = layers_within(hi);
  while (assigned > m.layers) {  // give back the surplus from the slowest-finishing stages
    auto worst = std::max_element(stages.begin(), stages.end(), [&](const Stage& a, const Stage& b) {
      return a.layers * parts[a.part].layer_seconds < b.layers * parts[b.part].layer_seconds;
    });
    --worst->layers;
    --assigned;
  }
  double slowest = 0;
  int used_stages = 0;
  for (const Stage& s : stages) {
    slowest = std::max(slowest, s.layers * parts[s.part].layer_seconds);
    used_stages += s.layers > 0 ? 1 : 0;
  }
  // Activations (forward) and their gradients (backward) cross each stage boundary per
  // micro-batch, over the network (stages sit on different nodes), on the critical path.
  double network = std::numeric_limits<double>::infinity();
  for (const StageClass& c : parts) network = std::min(network, c.fig.network_bytes_per_s);
  const double boundary_bytes = static_cast<double>(w.seq) * w.micro_batch * m.hidden * ActivationElementBytes(w);
  const double link_per_micro = used_stages > 1 ? 2 * (boundary_bytes / network + kNetworkLatency) : 0;
  const double slots = micro + used_stages - 1;  // 1F1B: m micro-batches through p stages

  MixedPlan& plan = out.plan;
  plan.kind = MixedKind::kPipeline;
  plan.tokens_per_step = static_cast<double>(w.micro_batch) * w.seq * micro;
  plan.compute_seconds = slots * slowest;
  plan.link_seconds = slots * link_per_micro;
  plan.link_gbytes_per_s = network / 1e9;
  plan.tokens_per_second = plan.tokens_per_step / (plan.compute_seconds + plan.link_seconds);
  // Stages left without a layer drop out: the first and last that keep some hold the embeddings.
  int first_used = n, last_used = -1;
  for (int i = 0; i < n; ++i) {
    if (stages[i].layers == 0) continue;
    first_used = std::min(first_used, i);
    last_used = i;
  }
  for (size_t p = 0; p < parts.size(); ++p) {
    MixedGroup g;
    g.label = parts[p].cls->label;
    g.fingerprint = parts[p].cls->fingerprint;
    g.card_bytes = parts[p].card_bytes;
    for (int i = 0; i < n; ++i) {
      if (stages[i].part != p || stages[i].layers == 0) continue;
      g.stage_layers.push_back(stages[i].layers);
      g.layers += stages[i].layers;
      g.required_bytes = std::max(g.required_bytes, StageBytes(parts[p], stages[i].layers, std::min(n - i, micro),
                                                               i == first_used, i == last_used, prices.memory_margin));
    }
    if (g.required_bytes > g.card_bytes) {
      out.reason = absl::StrCat("pipeline across classes: ", g.label,
                                "'s stage would also hold the embeddings of the "
                                "stages left without a layer, and has no room for them");
      return out;
    }
    if (g.layers == 0) {
      plan.left_out.push_back(absl::StrCat(g.label, ": too slow to be given a layer"));
      continue;
    }
    g.cards = parts[p].tp * static_cast<int>(g.stage_layers.size());
    g.layout = Layout{parts[p].tp, static_cast<int>(g.stage_layers.size()), 1};
    g.share = static_cast<double>(g.layers) / m.layers;
    plan.cards += g.cards;
    plan.groups.push_back(std::move(g));
  }
  if (plan.groups.size() < 2) {
    out.reason = "pipeline across classes: one class takes every layer";
    return out;
  }
  plan.notes.push_back(
      absl::StrFormat("pipeline of %d stages, %d micro-batches a step: the bubble is %.0f%% of it "
                      "(--global-batch or --grad-accum set the micro-batches)",
                      used_stages, micro, 100.0 * (used_stages - 1) / slots));
  out.feasible = true;
  return out;
}

PipelineResult PlanDataParallel(const PlanRequest& req, const std::vector<const PoolClass*>& classes,
                                const std::vector<Plan>& alone, const PriceTable& prices) {
  PipelineResult out;
  MixedPlan& plan = out.plan;
  plan.kind = MixedKind::kDataParallel;
  std::vector<std::string> cannot;
  double throughput = 0;
  int lanes = 0;  // gradient shards exchanged in parallel: the group with the fewest sets the pace
  for (const PoolClass* cls : classes) {
    auto it =
        std::find_if(alone.begin(), alone.end(), [&](const Plan& p) { return p.fingerprint == cls->fingerprint; });
    if (it == alone.end()) {
      cannot.push_back(cls->label);
      continue;
    }
    MixedGroup g;
    g.label = it->label;
    g.fingerprint = it->fingerprint;
    g.layout = it->layout;
    g.cards = it->layout.Devices();
    g.required_bytes = it->required_bytes;
    g.card_bytes = it->card_bytes;
    g.layers = req.model.layers;
    g.tokens_per_second = TokensPerStep(AsPlanned(req.workload, *it), it->layout) / it->step_seconds;
    throughput += g.tokens_per_second;
    plan.tokens_per_step += TokensPerStep(AsPlanned(req.workload, *it), it->layout);
    plan.cards += g.cards;
    lanes = lanes == 0 ? it->layout.tp * it->layout.pp : std::min(lanes, it->layout.tp * it->layout.pp);
    const double network = FiguresOf(*cls, req.workload, prices, 1).network_bytes_per_s;
    plan.link_gbytes_per_s =
        plan.link_gbytes_per_s == 0 ? network / 1e9 : std::min(plan.link_gbytes_per_s, network / 1e9);
    plan.groups.push_back(std::move(g));
  }
  if (plan.groups.size() < 2) {
    out.reason =
        absl::StrCat("data-parallel groups: ", plan.groups.size(), " class(es) hold the whole model on their ",
                     "free cards", cannot.empty() ? "" : absl::StrCat(" (not ", absl::StrJoin(cannot, ", "), ")"));
    return out;
  }
  for (MixedGroup& g : plan.groups) g.share = g.tokens_per_second / throughput;
  // Every group computes for the same time; gradients (in the training precision's width) are
  // reduced inside each group (in its step time already), then between groups once a step.
  plan.compute_seconds = plan.tokens_per_step / throughput;
  const double grad_bytes = static_cast<double>(TrainableParams(req.model, req.workload)) *
                            (req.workload.precision == Precision::kFp32 ? 4 : 2);
  plan.link_seconds = RingAllReduceSeconds(grad_bytes / std::max(1, lanes), static_cast<int>(plan.groups.size()),
                                           plan.link_gbytes_per_s * 1e9, kNetworkLatency);
  plan.tokens_per_second = plan.tokens_per_step / (plan.compute_seconds + plan.link_seconds);
  out.feasible = true;
  return out;
}

}  // namespace

std::string MixedKindName(MixedKind kind) {
  return kind == MixedKind::kPipeline ? "pipeline across classes" : "data-parallel groups";
}

absl::StatusOr<MixedPlan> MakeMixedPlan(const PlanRequest& request, const std::vector<PoolClass>& classes,
                                        const PriceTable& prices) {
  if (request.workload.mode != Mode::kTrain) {
    return absl::InvalidArgumentError(
        "--mixed plans training (stages or data-parallel groups across classes); serving replicas of different "
        "classes are separate jobs");
  }
  if (request.cards > 0 || request.layout) {
    return absl::InvalidArgumentError("--mixed takes every free card of each class: not with --cards or --layout");
  }
  if (absl::Status s = Validate(request.model); !s.ok()) return s;
  if (absl::Status s = Validate(request.workload); !s.ok()) return s;
  const Workload& w = request.workload;
  std::vector<std::string> left_out;
  std::vector<const PoolClass*> taking_part;
  std::vector<Plan> alone;
  for (const PoolClass& cls : classes) {
    const std::string who = absl::StrCat(cls.label, " x", cls.Free());
    if (cls.Free() == 0) {
      left_out.push_back(absl::StrCat(cls.label, ": no free cards"));
      continue;
    }
    if (!cls.example.capability.precisions.contains(w.precision)) {
      left_out.push_back(absl::StrCat(who, ": does not support ", drivers::PrecisionName(w.precision)));
      continue;
    }
    if (!cls.example.capability.peak_tflops.contains(w.precision)) {
      left_out.push_back(absl::StrCat(who, ": no ", drivers::PrecisionName(w.precision),
                                      " peak figure (give one in the spec table, docs/fingerprints.md)"));
      continue;
    }
    taking_part.push_back(&cls);
    PlanRequest one = request;
    one.cards = cls.Free();
    auto result = MakePlan(one, {cls}, prices);
    if (result.ok() && result->plans.front().feasible && result->plans.front().step_seconds > 0) {
      alone.push_back(result->plans.front());
    }
  }
  std::sort(alone.begin(), alone.end(),
            [&](const Plan& a, const Plan& b) { return SecondsPerToken(a, w) < SecondsPerToken(b, w); });
  if (taking_part.size() < 2) {
    return absl::FailedPreconditionError(
        absl::StrCat("a job across classes needs two classes with free cards and a speed figure; ", taking_part.size(),
                     " here", left_out.empty() ? "" : absl::StrCat(" (", absl::StrJoin(left_out, "; "), ")")));
  }
  // Every combination of the classes' stage tensor parallelism (a handful each): the fastest.
  PipelineResult pipeline;
  std::vector<std::vector<int>> degrees;
  double combinations = 1;
  for (const PoolClass* cls : taking_part) {
    degrees.push_back(StageTensorDegrees(*cls, request.model));
    combinations *= static_cast<double>(degrees.back().size());
  }
  constexpr double kMaxCombinations = 4096;  // many classes: each at one node's degree only
  if (combinations > kMaxCombinations) {
    for (auto& d : degrees) d = {d.back()};
  }
  std::vector<size_t> pick(taking_part.size(), 0);
  for (bool more = true; more;) {
    std::vector<int> tps;
    for (size_t k = 0; k < pick.size(); ++k) tps.push_back(degrees[k][pick[k]]);
    PipelineResult tried = PlanPipeline(request, taking_part, tps, prices);
    if (tried.feasible && (!pipeline.feasible || tried.plan.tokens_per_second > pipeline.plan.tokens_per_second)) {
      pipeline = std::move(tried);
    } else if (!pipeline.feasible && pipeline.reason.empty()) {
      pipeline.reason = tried.reason;
    }
    more = false;
    for (size_t k = 0; k < pick.size() && !more; ++k) {
      if (++pick[k] < degrees[k].size()) {
        more = true;
      } else {
        pick[k] = 0;
      }
    }
  }
  PipelineResult data = PlanDataParallel(request, taking_part, alone, prices);
  if (!pipeline.feasible && !data.feasible) {
    return absl::FailedPreconditionError(
        absl::StrCat("no job across classes fits: ", data.reason, "; ", pipeline.reason));
  }
  const bool pick_pipeline =
      pipeline.feasible && (!data.feasible || pipeline.plan.tokens_per_second >= data.plan.tokens_per_second);
  MixedPlan mixed = pick_pipeline ? std::move(pipeline.plan) : std::move(data.plan);
  const PipelineResult& other = pick_pipeline ? data : pipeline;
  mixed.notes.push_back(other.feasible ? absl::StrFormat("%s: %.0f tokens/s", MixedKindName(other.plan.kind),
                                                         other.plan.tokens_per_second)
                                       : other.reason);
  mixed.left_out.insert(mixed.left_out.begin(), left_out.begin(), left_out.end());
  std::sort(mixed.groups.begin(), mixed.groups.end(),
            [](const MixedGroup& a, const MixedGroup& b) { return a.share > b.share; });
  mixed.alone = std::move(alone);
  // The fastest single class given as many cards as the mixed job (where one has that many).
  PlanRequest same = request;
  same.cards = mixed.cards;
  std::vector<PoolClass> enough;
  for (const PoolClass& cls : classes) {
    if (cls.Free() >= mixed.cards) enough.push_back(cls);
  }
  if (!enough.empty()) {
    auto result = MakePlan(same, enough, prices);
    if (result.ok()) {
      for (const Plan& p : result->plans) {
        if (!p.feasible || p.step_seconds <= 0) continue;
        if (!mixed.same_cards || SecondsPerToken(p, w) < SecondsPerToken(*mixed.same_cards, w)) mixed.same_cards = p;
      }
    }
  }
  if (mixed.same_cards) mixed.same_cards_tokens_per_second = 1 / SecondsPerToken(*mixed.same_cards, w);
  if (!mixed.alone.empty()) mixed.fastest_alone_tokens_per_second = 1 / SecondsPerToken(mixed.alone.front(), w);
  return mixed;
}

}  // namespace hetpool::planner
