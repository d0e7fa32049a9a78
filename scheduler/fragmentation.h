// Fragmentation of a GPU node with respect to the expected mix of task shapes, as in FGD ("Beware
// of Fragmentation", ATC '23): the GPU capacity (milli-GPU) on a node that a task could not use.
// Placing each task where the expected fragmentation grows least keeps whole GPUs and whole nodes
// free for the shapes that need them. Quantities are fixed-point integers (milli-GPU, milli-CPU).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace hetpool::scheduler {

inline constexpr int kMaxGpusPerNode = 8;
inline constexpr int kWholeGpuMilli = 1000;

struct GpuNodeState {
  int model = 0;  // GPU model id (for type constraints)
  int gpus = 0;
  int64_t cpu_milli_left = 0;
  int64_t memory_mib_left = 0;
  std::array<int32_t, kMaxGpusPerNode> gpu_milli_left{};  // per GPU, 0..1000
  int64_t GpuMilliLeft() const;
};

struct TaskShape {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int num_gpu = 0;          // 0 CPU-only, 1 with gpu_milli < 1000 fractional, else whole GPUs
  int32_t gpu_milli = 0;    // per GPU
  uint64_t model_mask = 0;  // allowed GPU models (bit per model id); 0 = any
  double weight = 0;        // share of the workload
  bool AllowsModel(int model) const { return model_mask == 0 || (model_mask >> model) & 1; }
  bool Fractional() const { return num_gpu == 1 && gpu_milli < kWholeGpuMilli; }
};

// Whether the node's GPUs can take the task: a fractional task needs one GPU with enough free
// milli, a k-GPU task k idle GPUs (CPU, memory and GPU type are checked by the caller).
bool GpusFit(const GpuNodeState& node, const TaskShape& task);

// Milli-GPU on `node` that `task` could not use (all of it when the task cannot land there or
// uses no GPU). Host memory decides feasibility only, as in the FGD paper.
int64_t Fragmentation(const GpuNodeState& node, const TaskShape& task);

// The FGD paper's score for a placement that grows the expected fragmentation by
// `increase_milli` milli-GPU: int(100 * sigmoid(-increase / 1000)), 0..100, 50 for no change.
// Its levels are about 40 milli-GPU wide near zero, so near-equal placements tie.
int FgdScore(double increase_milli);

// Sum over the workload of weight x Fragmentation, memoised by node state (states repeat a lot:
// idle nodes of one model, full nodes, common partial patterns).
class ExpectedFragmentation {
 public:
  explicit ExpectedFragmentation(std::vector<TaskShape> workload);
  double Of(const GpuNodeState& node);
  size_t cache_size() const { return cache_.size(); }

 private:
  struct Key {
    int model;
    int64_t cpu;
    std::array<int32_t, kMaxGpusPerNode> gpus;  // sorted
    bool operator==(const Key& o) const { return model == o.model && cpu == o.cpu && gpus == o.gpus; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  std::vector<TaskShape> workload_;
  std::unordered_map<Key, double, KeyHash> cache_;
};

}  // namespace hetpool::scheduler
