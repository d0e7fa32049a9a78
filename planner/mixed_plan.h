// One training job across the pool's classes of cards (docs/mixed-vendor.md), two ways, the faster
// kept:
//  - data-parallel groups: each class a group with its own layout (the plan it gets alone on its
//    free cards), the global batch split by each group's modelled throughput so no group waits,
//    the gradients exchanged between groups over the network once a step. Every class must hold
//    the whole model on its own cards.
//  - a pipeline across classes (HETHUB, Metis): each class's cards in stages of one node's tensor
//    parallelism, the layers given to stages by speed within each stage's memory, activations
//    sent between stages over the network; small-memory classes take part with a few layers.
// Compared with each class alone on its free cards.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "planner/planner.h"

namespace hetpool::planner {

struct MixedGroup {
  std::string label;
  std::string fingerprint;
  int cards = 0;
  Layout layout;   // data-parallel groups: the class's own; pipeline: tp x its stages
  int layers = 0;  // pipeline: layers on the class's stages (each stage's in `stage_layers`)
  std::vector<int> stage_layers;
  double required_bytes = 0;  // per card, the most loaded of its stages (estimate + margin + reserve)
  double card_bytes = 0;
  double tokens_per_second = 0;  // data-parallel groups: the class alone
  double share = 0;              // of the work: batch share, or of the model's layers
};

enum class MixedKind { kDataParallel, kPipeline };

struct MixedPlan {
  MixedKind kind = MixedKind::kPipeline;
  std::vector<MixedGroup> groups;     // the classes in the job, fastest first
  std::vector<std::string> left_out;  // "metax MXC500 x2: no bf16 peak figure (...)"
  std::vector<std::string> notes;     // why the other kind was not chosen, the bubble
  double tokens_per_step = 0;
  double compute_seconds = 0;    // per step: compute (pipeline: with its bubble)
  double link_seconds = 0;       // per step: traffic between classes, not hidden
  double link_gbytes_per_s = 0;  // per card, the slowest class's network figure
  double tokens_per_second = 0;  // the mixed job
  int cards = 0;
  std::vector<Plan> alone;         // each class alone on its free cards (feasible), fastest first
  std::optional<Plan> same_cards;  // the fastest single class on as many cards as the mixed job
  double same_cards_tokens_per_second = 0;
  double fastest_alone_tokens_per_second = 0;  // alone.front()
};

std::string MixedKindName(MixedKind kind);

// Training only (serving replicas of different classes are separate jobs). FAILED_PRECONDITION
// when fewer than two classes can take part (the reasons say why each is left out).
absl::StatusOr<MixedPlan> MakeMixedPlan(const PlanRequest& request, const std::vector<PoolClass>& classes,
                                        const PriceTable& prices);

}  // namespace hetpool::planner
