// Ranks ways to run one model workload on the pool's classes of cards. For each fingerprint
// class: the smallest device count and (tensor, pipeline, data) layout whose per-card memory fits
// with the margin and runtime reserve, its time per step and for the token budget, its cost from
// the price table and its cost-performance against a baseline class.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/compute_time.h"
#include "planner/memory.h"
#include "planner/model.h"
#include "planner/pool.h"

namespace hetpool::planner {

enum class Objective { kCost, kTime, kNow };
absl::StatusOr<Objective> ParseObjective(absl::string_view name);
absl::string_view ObjectiveName(Objective objective);

struct PlanRequest {
  ModelSpec model;
  Workload workload;
  Objective objective = Objective::kCost;
  int cards = 0;                 // > 0: use exactly this many cards (more data parallelism); 0 = the fewest that fit
  std::optional<Layout> layout;  // set: evaluate this layout on every class instead of choosing one
};

struct Plan {
  std::string fingerprint;
  std::string label;
  bool feasible = false;
  std::string reason;  // why not, when infeasible; notes (e.g. "TP over PCIe") when feasible
  Layout layout;
  int zero_stage = 0;  // as applied: 0 when there is one data-parallel replica to shard over
  int nodes = 0;       // nodes the job spans
  int devices_per_node = 0;
  MemoryBreakdown memory;     // per card, before margin and reserve (memory.allocator: the slack)
  double required_bytes = 0;  // estimate x (1 + margin) + allocator slack + reserve
  double card_bytes = 0;
  int64_t grad_accum = 0;          // micro-batches per step as planned (training; see Workload)
  double step_seconds = 0;         // 0 = unknown (no peak figure for the precision)
  double comm_seconds = 0;         // of step_seconds, collectives that compute does not hide
  double total_seconds = 0;        // for the token budget; 0 when no budget or unknown
  double price_per_card_hour = 0;  // 0 = not priced
  double cost = 0;
  double cost_performance = 0;  // vs the baseline class; 0 = not comparable
  bool available_now = false;   // free capacity could start it at once
  int class_total = 0;
  int class_free = 0;
};

struct PlanResult {
  std::vector<Plan> plans;  // feasible ones ranked by the objective, then the infeasible ones
  std::string currency;
  std::string baseline;  // label of the cost-performance baseline, empty when none
  int64_t total_params = 0;
  int64_t active_params = 0;
  int64_t trainable_params = 0;
  std::string family;  // the architecture the model was read as
  double flops_per_token = 0;
  // When nothing is feasible: how close the pool comes, in words.
  std::string infeasible_summary;
  // What the order rests on, in words: the objective, or what stood in for it when the pool lacks
  // what it needs (no prices: time per token).
  std::string ranked_by;
};

// Validates the inputs (a clear error naming the field), then plans against `classes`.
absl::StatusOr<PlanResult> MakePlan(const PlanRequest& request, const std::vector<PoolClass>& classes,
                                    const PriceTable& prices);

// Ring all-reduce of `bytes` over `ranks`: 2 (n - 1) / n of the data crosses each link, in
// 2 (n - 1) latency-bound steps (the NCCL/CNCL ring).
double RingAllReduceSeconds(double bytes, int ranks, double bytes_per_s, double latency_s);

// The workload as a plan runs it: with the micro-batches per step chosen for its layout.
Workload AsPlanned(const Workload& workload, const Plan& plan);

// The micro-batches per step a layout runs: the workload's, or with a global batch bound the most
// that stay within it (at least one).
int64_t GradAccumFor(const Workload& workload, const Layout& layout);

// The global batch published recipes use, by model size: GPT-3's 0.5M tokens up to 1B parameters
// and 1M up to 6B (Brown et al. 2020, table 2.1), Llama 2's 4M from there (Touvron et al. 2023).
int64_t DefaultGlobalBatchTokens(const ModelSpec& model);

// Seconds a plan spends per token (infinite when its step time is unknown).
double SecondsPerToken(const Plan& plan, const Workload& workload);

// Tokens one step processes: micro batch x sequence x accumulation x data-parallel replicas
// (serving: sequences x replicas).
double TokensPerStep(const Workload& w, const Layout& l);

// "TP4 PP2 DP1 ZeRO-3": how a layout is written everywhere (ZeRO only when stage > 0).
std::string LayoutName(const Layout& layout, int zero_stage);

// "1.2 TB", "80 GiB": the human size used in reasons.
std::string HumanBytes(double bytes);

}  // namespace hetpool::planner
