// How the planner turns a model's work into seconds of compute on one class of cards: what a
// single-class step (planner.cc) and a stage of a pipeline across classes (mixed_plan.cc) both
// time their compute with. Communication and the pipeline bubble are the callers'.
#pragma once

#include "planner/memory.h"
#include "planner/model.h"
#include "planner/pool.h"

namespace hetpool::planner {

// Model FLOPs per token (6N + attention for training, 2N + attention per generated token), what
// MFU is measured against: recomputation is not counted.
double ModelFlopsPerToken(const ModelSpec& model, const Workload& workload);

// One class's compute, in one of two forms:
//  - a flat model-FLOPs utilisation: seconds = model FLOPs / (peak x mfu). What the operator
//    states in the price table (it is what their runs reach), and the default where the card's
//    stack has not been measured or its memory bandwidth is unknown;
//  - two terms (NVIDIA's default): the matmuls at a share of the peak, plus the elementwise
//    work between them (norms, activations, residuals, rotary, casts: a few hundred bytes per
//    hidden unit per layer and token) at the card's memory bandwidth. This is why wider models
//    reach a higher MFU, and why a card with more bandwidth per FLOP (A100 against H100/H200)
//    does too.
struct ComputeModel {
  double peak_flops = 0;          // dense, in the compute precision; 0 = unknown
  double mfu = 0;                 // > 0: the flat form
  double matmul_share = 0;        // the two-term form: share of the peak the matmuls reach
  double memory_bytes_per_s = 0;  // and the card's memory bandwidth
};

// The class's model: the table's MFU when it states one, else the two-term defaults for NVIDIA
// cards with a bandwidth figure, else the vendor's flat default MFU.
ComputeModel ComputeModelFor(const PoolClass& cls, double peak_flops, const ClassPricing* row);

// Seconds `cards` cards (tensor or data parallel, sharing the work evenly) take for `tokens`
// tokens through `layer_share` of the model's layers (1 = the whole model). Recomputation costs
// the two-term form one more forward with --recompute full (a flat MFU already includes it). 0
// when the peak is unknown.
double ComputeSeconds(const ComputeModel& compute, const ModelSpec& model, const Workload& workload, double tokens,
                      double layer_share, int cards);

// The two-term defaults (docs/planner.md, "Step time", says how they were fitted).
inline constexpr double kNvidiaMatmulShare = 0.593;
// Bytes of elementwise traffic per layer, per hidden unit and per trained token in 16-bit
// activations, forward and backward together (forward alone: a third).
inline constexpr double kElementwiseBytesPerWidth = 885;

}  // namespace hetpool::planner
