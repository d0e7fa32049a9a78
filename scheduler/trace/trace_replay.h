// Replays the Alibaba GPU cluster trace (../shared/traces/alibaba-gpu-v2023) through the daemon's
// scheduler (scheduler::Framework, built from a profile) under the protocol of the FGD paper's
// simulator, to compare profiles by GPU allocation ratio. An adapter turns trace nodes into node
// views (CPU, memory, GPUs) and pods into placement requests (fractional shares included); a
// binder applies each placement to the views, as the daemon's claims do. The protocol:
//  - the GPU nodes, all empty; pods shuffled per seed, then copies drawn with replacement from the
//    original list appended until requested GPU passes the target (130%) of capacity (files that
//    already exceed it lose random pods instead);
//  - pods only arrive; a pod that cannot be placed is dropped, never retried;
//  - CPU and memory must fit (the HostResources filter); CPU-only pods land on GPU nodes too;
//  - the views are in a fixed per-seed random order, which is where score ties go;
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
  int32_t gpu_milli = 0;              // per GPU
  std::vector<std::string> gpu_spec;  // allowed models; empty = any
  std::string qos;                    // LS, BE, Burstable, Guaranteed ("" in the 5-column files)
  // Seconds from the trace's start; -1 where the file has none (5-column files, pods that never
  // ran or never ended).
  int64_t creation_time = -1, scheduled_time = -1, deletion_time = -1;
  int64_t GpuDemand() const { return static_cast<int64_t>(num_gpu) * gpu_milli; }
};

absl::StatusOr<std::vector<TraceNode>> LoadNodes(const std::string& csv_path);
// Reads both the 11-column files and the 5-column multigpu files.
absl::StatusOr<std::vector<TracePod>> LoadPods(const std::string& csv_path);

struct ReplayOptions {
  // The scheduler profile, exactly as hetpoold --scheduler-profile takes it (profile.h).
  std::string profile_json;
  uint64_t seed = 42;
  double target_demand = 1.3;  // requested GPU / capacity when arrivals stop
  size_t node_limit = 0;       // use only the first N nodes (0 = all); for quick tests
  // The mix declared to the scheduler (Framework::ExpectWorkload, read by Fgd with "mix":
  // "expected"): the most popular task shapes, added `typical_shapes_step` at a time until they
  // cover this share of the pods (the simulator's "typical pods"). The paper's runs
  // (scripts/generate_config_and_run.py) use 95% in steps of 1; 100 = every shape.
  double typical_shapes_pct = 95;
  int typical_shapes_step = 1;
};

struct ReplayResult {
  double allocation_ratio = 0;  // allocated milli-GPU / capacity
  double demand_ratio = 0;      // arrived milli-GPU / capacity
  size_t pods = 0, placed = 0, failed = 0;
  int64_t capacity_milli = 0;
  double seconds = 0;
};

// Fails only when the profile does.
absl::StatusOr<ReplayResult> Replay(const std::vector<TraceNode>& nodes, const std::vector<TracePod>& pods,
                                    const ReplayOptions& options);

}  // namespace hetpool::scheduler::trace
