#include "scheduler/fragmentation.h"

#include <algorithm>
#include <cmath>

namespace hetpool::scheduler {

int64_t GpuNodeState::GpuMilliLeft() const {
  int64_t total = 0;
  for (int i = 0; i < gpus; ++i) total += gpu_milli_left[i];
  return total;
}

bool GpusFit(const GpuNodeState& node, const TaskShape& task) {
  if (task.num_gpu == 0) return true;
  int fitting = 0;  // GPUs this task could use: enough milli for a share, idle for whole GPUs
  const int32_t need = task.Fractional() ? task.gpu_milli : kWholeGpuMilli;
  for (int i = 0; i < node.gpus; ++i) fitting += node.gpu_milli_left[i] >= need;
  return fitting >= (task.Fractional() ? 1 : task.num_gpu);
}

int64_t Fragmentation(const GpuNodeState& node, const TaskShape& task) {
  const int64_t left = node.GpuMilliLeft();
  if (left == 0) return 0;
  // A CPU-only task can never use GPU capacity, and a task that cannot land here (CPU short,
  // GPU type not allowed) can use none of it: all free milli-GPU is fragment for it.
  if (task.num_gpu == 0 || node.cpu_milli_left < task.cpu_milli || !task.AllowsModel(node.model)) return left;
  if (!GpusFit(node, task)) return left;
  // It fits: the GPUs too small for it (below its share, or not idle for whole-GPU tasks) are fragment.
  const int32_t need = task.Fractional() ? task.gpu_milli : kWholeGpuMilli;
  int64_t unusable = 0;
  for (int i = 0; i < node.gpus; ++i) {
    if (node.gpu_milli_left[i] < need) unusable += node.gpu_milli_left[i];
  }
  return unusable;
}

int FgdScore(double increase_milli) {
  return static_cast<int>(std::floor(100.0 / (1.0 + std::exp(increase_milli / 1000.0))));
}

size_t ExpectedFragmentation::KeyHash::operator()(const Key& k) const {
  uint64_t h = static_cast<uint64_t>(k.model) * 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(k.cpu);
  for (int32_t g : k.gpus) h = (h ^ static_cast<uint64_t>(g)) * 0x100000001b3ull;
  return static_cast<size_t>(h);
}

ExpectedFragmentation::ExpectedFragmentation(std::vector<TaskShape> workload) : workload_(std::move(workload)) {}

double ExpectedFragmentation::Of(const GpuNodeState& node) {
  Key key{node.model, node.cpu_milli_left, node.gpu_milli_left};
  // GPU order does not change fragmentation, so the key holds the sorted free amounts.
  std::sort(key.gpus.begin(), key.gpus.begin() + node.gpus, std::greater<>());
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  double sum = 0;
  for (const auto& t : workload_) sum += t.weight * static_cast<double>(Fragmentation(node, t));
  cache_.emplace(key, sum);
  return sum;
}

}  // namespace hetpool::scheduler
