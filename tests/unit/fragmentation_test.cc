// FGD's fragmentation measure, one row per rule (the trace replays are in trace_replay_test.cc).
#include "scheduler/fragmentation.h"

#include "gtest/gtest.h"

namespace hetpool::scheduler {
namespace {

GpuNodeState Node(std::vector<int32_t> gpus, int64_t cpu = 64000, int model = 0) {
  GpuNodeState s;
  s.model = model;
  s.gpus = static_cast<int>(gpus.size());
  s.cpu_milli_left = cpu;
  s.memory_mib_left = 1 << 20;
  for (size_t i = 0; i < gpus.size(); ++i) s.gpu_milli_left[i] = gpus[i];
  return s;
}

TaskShape Task(int num_gpu, int32_t milli, int64_t cpu = 4000, uint64_t mask = 0) {
  return TaskShape{cpu, 0, num_gpu, milli, mask, 1.0};
}

TEST(Fragmentation, Rules) {
  struct Row {
    const char* what;
    GpuNodeState node;
    TaskShape task;
    int64_t expect;
  } rows[] = {
      {"no free GPU: nothing to fragment", Node({0, 0}), Task(1, 500), 0},
      {"CPU-only task can use no GPU", Node({1000, 300}), Task(0, 0), 1300},
      {"fractional: GPUs below the request are fragment", Node({1000, 300, 200}), Task(1, 500), 500},
      {"fractional that fits nowhere: everything", Node({300, 200}), Task(1, 500), 500},
      {"whole GPUs: partial GPUs are fragment", Node({1000, 1000, 600}), Task(2, 1000), 600},
      {"whole GPUs short: everything", Node({1000, 600, 600}), Task(2, 1000), 2200},
      {"CPU short: everything", Node({1000, 1000}, 2000), Task(1, 1000, 4000), 2000},
      {"GPU type not allowed: everything", Node({1000}, 64000, 1), Task(1, 1000, 4000, 1ull << 0), 1000},
      {"GPU type allowed", Node({1000}, 64000, 1), Task(1, 1000, 4000, 1ull << 1), 0},
  };
  for (const auto& r : rows) EXPECT_EQ(Fragmentation(r.node, r.task), r.expect) << r.what;
}

TEST(Fragmentation, ExpectedIsTheWeightedSumAndIgnoresGpuOrder) {
  ExpectedFragmentation ef({TaskShape{1000, 0, 1, 500, 0, 0.25}, TaskShape{1000, 0, 1, 1000, 0, 0.75}});
  const double a = ef.Of(Node({1000, 300}));
  EXPECT_DOUBLE_EQ(a, 0.25 * 300 + 0.75 * 300);
  EXPECT_DOUBLE_EQ(ef.Of(Node({300, 1000})), a);
  EXPECT_EQ(ef.cache_size(), 1u);
}

}  // namespace
}  // namespace hetpool::scheduler
