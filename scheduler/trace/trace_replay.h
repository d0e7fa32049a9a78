// Replays the Alibaba GPU cluster trace (../shared/traces/alibaba-gpu-v2023) under the protocol of
// the FGD paper's simulator, to compare placement policies by GPU allocation ratio:
//  - the GPU nodes, all empty; pods shuffled per seed, then copies drawn with replacement from the
//    original list appended until requested GPU passes the target (130%) of capacity (files that
//    already exceed it lose random pods instead);
//  - pods only arrive; a pod that cannot be placed is dropped, never retried;
//  - CPU and memory must fit; CPU-only pods land on GPU nodes too; a k-GPU pod needs k idle GPUs
//    and takes the lowest-index ones;
//  - score ties go to the node earliest in a fixed per-seed random order;
//  - metric: allocated milli-GPU / total milli-GPU once all pods have arrived.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace hetpool::scheduler::trace {

struct TraceNode {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int gpus = 0;
  std::string model;
};

struct TracePod {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int num_gpu = 0;
  int32_t gpu_milli = 0;             // per GPU
  std::vector<std::string> gpu_spec; // allowed models; empty = any
  int64_t GpuDemand() const { return static_cast<int64_t>(num_gpu) * gpu_milli; }
};

absl::StatusOr<std::vector<TraceNode>> LoadNodes(const std::string& csv_path);
// Reads both the 11-column files and the 5-column multigpu files.
absl::StatusOr<std::vector<TracePod>> LoadPods(const std::string& csv_path);

// kFgd is FGD as the paper's simulator runs it; kDefault is hetpool's: the same scores, with ties
// broken by what the task does to whole GPUs and whole nodes before node order (TieRank).
enum class Policy { kRandom, kBestFit, kPacking, kFgd, kDefault };
absl::StatusOr<Policy> ParsePolicy(const std::string& name);  // random | bestfit | packing | fgd | default
const char* PolicyName(Policy policy);

struct ReplayOptions {
  Policy policy = Policy::kFgd;
  uint64_t seed = 42;
  double target_demand = 1.3;   // requested GPU / capacity when arrivals stop
  size_t node_limit = 0;        // use only the first N nodes (0 = all); for quick tests
  // FGD weighs the most popular task shapes, added `typical_shapes_step` at a time until they
  // cover this share of the pods (the simulator's "typical pods"). The paper's runs
  // (scripts/generate_config_and_run.py) use 95% in steps of 1; 100 = every shape.
  double typical_shapes_pct = 95;
  int typical_shapes_step = 1;
  // The paper's FGD plugin scores a placement int(100 * sigmoid(-increase / 1000)) (increase in
  // milli-GPU), for the GPU inside a node as well as across nodes: coarse levels, many ties.
  // false compares raw increases.
  bool sigmoid_scores = true;
  // Kubernetes-style normalisation of the scores to integers 0..score_levels per decision; 0 off.
  int score_levels = 0;
};

struct ReplayResult {
  double allocation_ratio = 0;  // allocated milli-GPU / capacity
  double demand_ratio = 0;      // arrived milli-GPU / capacity
  size_t pods = 0, placed = 0, failed = 0;
  int64_t capacity_milli = 0;
  double seconds = 0;
};

ReplayResult Replay(const std::vector<TraceNode>& nodes, const std::vector<TracePod>& pods,
                    const ReplayOptions& options);

}  // namespace hetpool::scheduler::trace
