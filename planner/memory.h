// How much memory one device needs for a training or inference job laid out over
// tensor x pipeline x data parallel ranks. Formulas and their sources: docs/planner.md.
//  - Model states: weights, gradients, optimizer moments and fp32 master weights per parameter,
//    split by ZeRO stage over the data-parallel degree and by the tensor and pipeline degrees.
//  - Activations: Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
//    Transformer Models"), generalised from its GeLU MLP to the gated MLP and grouped-query
//    attention the presets use, with dropout and attention kernel as inputs (they change the s^2
//    term) and none / selective / full recomputation.
//  - Inference: weights in the serving precision (embeddings and output projection stay 16-bit
//    in quantised checkpoints), the KV cache for the whole context, and the workspace of one
//    prefill chunk (tokens prefilled at once, in the activation precision).
// All figures are bytes per device, for the most loaded device (the first pipeline stage).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "hetpool/device.h"
#include "planner/model.h"

namespace hetpool::planner {

enum class Mode { kTrain, kInfer };
enum class Optimizer { kAdamW, kSgdMomentum, kSgd };  // Adam and AdamW keep the same state
enum class Recompute { kNone, kSelective, kFull };
enum class AttentionKernel { kEager, kFlash };  // eager materialises the s x s scores
// How 16-bit training keeps its weights:
//  kMasterWeights: 16-bit weights and gradients plus fp32 master weights (Megatron, DeepSpeed):
//                  2 + 2 + 4 + 8 = 16 bytes per parameter with Adam;
//  kAutocast:      fp32 weights and gradients, and torch.autocast saves a 16-bit copy of every
//                  matmul weight for backward: 4 + 4 + 8 + 2 = 18 bytes per parameter.
enum class MixedPrecision { kMasterWeights, kAutocast };

struct Workload {
  Mode mode = Mode::kTrain;
  Precision precision = Precision::kBf16;  // training compute / serving weight precision
  // Training.
  Optimizer optimizer = Optimizer::kAdamW;
  MixedPrecision mixed = MixedPrecision::kMasterWeights;
  int zero_stage = 0;  // 0..3
  int64_t micro_batch = 1;
  int64_t seq = 4096;
  int64_t grad_accum = 1;  // micro-batches per optimizer step (also fills the pipeline)
  // > 0: the planner chooses grad_accum for each layout instead, the most micro-batches a step
  // whose tokens (micro_batch x seq x data-parallel ranks x grad_accum) stay within this global
  // batch, as real runs fix their global batch (Llama 2: 4M tokens) rather than their accumulation.
  int64_t global_batch_tokens = 0;
  Recompute recompute = Recompute::kSelective;
  AttentionKernel attention = AttentionKernel::kFlash;
  bool dropout = false;
  // Megatron's sequence parallelism splits the norms' and dropouts' tensors across the tensor
  // ranks too (Korthikanti eq. 3); without it they are replicated on every rank (eq. 2).
  bool sequence_parallel = true;
  int64_t lora_rank = 0;         // > 0: frozen base weights, trainable adapters
  bool lora_all_linear = false;  // adapters on every linear layer; otherwise on Q and V only
  // Inference.
  int64_t batch = 1;       // concurrent sequences
  int64_t context = 4096;  // prompt + generated tokens per sequence
  int64_t prompt = 0;      // prompt tokens per sequence; 0 = the whole context
  // Tokens prefilled in one forward pass. Servers prefill in chunks (vLLM's chunked prefill,
  // SGLang's chunked_prefill_size), so the workspace is bounded by the chunk, not batch x prompt.
  int64_t prefill_chunk = 2048;
  Precision kv_precision = Precision::kBf16;
  // Both: the token budget (trained tokens, or generated tokens for inference).
  double tokens = 0;
};

struct Layout {
  int tp = 1;  // tensor parallel (inside one link group)
  int pp = 1;  // pipeline stages
  int dp = 1;  // data parallel replicas (ZeRO shards over these)
  int Devices() const { return tp * pp * dp; }
};

struct MemoryBreakdown {
  double weights = 0;  // working weights (16-bit copies, quantised weights, autocast copies)
  double gradients = 0;
  double optimizer = 0;    // moments
  double master = 0;       // fp32 master weights (mixed precision)
  double activations = 0;  // saved for backward, or the inference workspace
  double kv_cache = 0;
  double transient = 0;  // largest short-lived buffer: logits and loss gradients, gathers
  // What the card's caching allocator holds beyond the live tensors at the peak (set by the
  // planner per class: AllocatorSlackFraction). Not part of Total(): Total() is what the tensors
  // hold, which the sizing validation measures.
  double allocator = 0;
  double Total() const { return weights + gradients + optimizer + master + activations + kv_cache + transient; }
};

double BytesPer(Precision p);  // fp32 4, bf16/fp16 2, fp8/int8 1, int4 0.5

// The part of the saved activations a training step's caching allocator keeps reserved on top of
// the live tensors at its peak. PyTorch's CUDA allocator (and the MACA and Neuware ones, which
// follow it) keeps the blocks the backward pass frees in segments it cannot hand back or reuse
// whole for the gradients' other sizes. Measured on an H200 (../shared/docs/H200-RUN.md): reserved
// minus allocated peak was 0.24 and 0.26 of the estimated activations (1.1B and 3B Llama shapes),
// 7.4-7.6 GiB where the model states differed threefold. Serving (no backward) and CPU (glibc,
// which the sizing validation measures within 10% without it): 0.
double AllocatorSlackFraction(const Workload& w, Vendor vendor);

// Checks that the workload's fields are in range and consistent, naming the field.
absl::Status Validate(const Workload& w);

// Per-device memory of the first pipeline stage. Assumes Validate() passed for both inputs.
MemoryBreakdown EstimateMemory(const ModelSpec& model, const Workload& w, const Layout& layout);

// Bytes transformer layer `layer` saves for backward, per micro-batch, on one tensor-parallel rank
// (layers differ only in MoE models with leading dense layers; -1 = the last layer).
double LayerActivationBytes(const ModelSpec& model, const Workload& w, const Layout& layout, int64_t layer = -1);

// Inference: the prompt tokens per sequence, and how many tokens one prefill pass takes.
int64_t PromptTokens(const Workload& w);
int64_t PrefillTokens(const Workload& w);

// Bytes per parameter of stored weights in precision p: quantised formats carry their scales
// (int4: one 16-bit scale per group of 128 weights).
double StoredBytesPer(Precision p);

// Trainable parameters: all of them, or the LoRA adapters'.
int64_t TrainableParams(const ModelSpec& model, const Workload& w);

}  // namespace hetpool::planner
