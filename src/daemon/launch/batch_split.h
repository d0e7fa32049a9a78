// A job's global batch split over its ranks by how fast each rank's card is (a job across vendors:
// no fast card waits on a slow one at the step's all-reduce), as HETHUB and Metis split work.
// Pure, so unit-tested on its own.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace hetpool::daemon {

// One node of the placement: its ranks and their card's speed.
struct SplitNode {
  std::string label;  // the card class, for the summary ("nvidia H100-SXM")
  int ranks = 1;
  std::optional<double> tflops;  // the card's modelled compute (peak x MFU) in the job's precision; unknown: even split
};

struct BatchSplit {
  std::vector<std::vector<int>> micro_batches;  // per node, per local rank; they sum to the global batch
  bool by_speed = false;                        // false: every speed was not known, the split is even
  std::string summary;                          // "nvidia H100-SXM: 2 rank(s) x 21 (395.6 TFLOPS bf16 modelled); ..."
};

// Each rank gets global_batch x its speed / the sum of all ranks' speeds, rounded by largest
// remainder so the micro batches sum exactly to global_batch, and at least 1 sample each.
// INVALID_ARGUMENT when global_batch is smaller than the ranks.
absl::StatusOr<BatchSplit> SplitGlobalBatch(int global_batch, const std::vector<SplitNode>& nodes,
                                            const std::string& precision);

}  // namespace hetpool::daemon
