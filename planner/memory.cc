#include "planner/memory.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace hetpool::planner {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Parameters held by the first pipeline stage of one tensor-parallel rank: its share of the
// layers plus the input embedding (and the output projection too when there is one stage).
// `embeddings` receives the embedding part (quantised checkpoints keep it in 16 bits).
double StageParams(const ModelSpec& m, const Layout& l, double* embeddings) {
  const int64_t layers = CeilDiv(m.layers, l.pp);
  const int64_t embedding = l.pp == 1 ? m.EmbeddingParams() : m.InputEmbeddingParams();
  if (embeddings) *embeddings = static_cast<double>(embedding) / l.tp;
  return static_cast<double>(m.LayersParams(0, layers, false) + embedding + m.FinalNormParams()) / l.tp;
}

// Adapter parameters: rank r on Q and V (PEFT's default for these models) or every linear layer.
int64_t LoraParams(const ModelSpec& m, const Workload& w) {
  const int64_t r = w.lora_rank;
  int64_t per_layer = r * (m.hidden + m.QDim()) + r * (m.hidden + m.KvDim());
  if (w.lora_all_linear) {
    per_layer += r * (m.hidden + m.KvDim()) + r * (m.QDim() + m.hidden);
    const int64_t matrices = m.mlp == MlpKind::kGated ? 3 : 2;
    const int64_t mlps = m.IsMoe() ? m.experts : 1;
    per_layer += mlps * matrices * r * (m.hidden + (m.IsMoe() ? m.ExpertWidth() : m.intermediate));
  }
  return per_layer * m.layers;
}

// Element size of activations: fp32 keeps fp32 tensors, every 16-bit mode keeps 16-bit ones
// (fp8 recipes keep bf16 activations around their fp8 GEMMs; weight-only int8/int4 serving
// dequantises into 16-bit matmuls).
double ActivationBytes(const Workload& w) {
  return w.precision == Precision::kFp32 || w.precision == Precision::kTf32 ? 4.0 : 2.0;
}

// Quantised weights (fp8, int8, int4): the embeddings and the output projection stay in 16 bits,
// as in GPTQ/AWQ/bitsandbytes checkpoints and vLLM's fp8 (the LM head is not quantised).
bool KeepsEmbeddingsIn16Bit(Precision p) {
  return p == Precision::kFp8 || p == Precision::kInt8 || p == Precision::kInt4;
}

// Live bytes of one layer's forward pass on `tokens` tokens at once with no autograd (serving),
// from `sequences` sequences, each query attending over at most `keys` keys: the residual stream
// and the norm's output, plus the larger of the attention phase and the MLP phase (tensors are
// freed as the layer goes, so the two phases do not add up). In a MoE model with leading dense
// layers the larger of its two kinds of MLP.
double ServingLayerWorkspace(const ModelSpec& m, const Workload& w, const Layout& l, double tokens, double keys,
                             double sequences) {
  const double e = ActivationBytes(w), t = l.tp;
  const double h = static_cast<double>(m.hidden);
  const double q = static_cast<double>(m.QDim()) / t;
  const double kv = std::max(static_cast<double>(m.head_dim), static_cast<double>(m.KvDim()) / t);
  const double heads = std::max(1.0, static_cast<double>(m.heads) / t);
  double attention = tokens * (q + 2 * kv + q) * e;  // Q, K, V and the attention output
  if (w.attention == AttentionKernel::kEager) {
    attention += 2 * heads * tokens * keys * e;             // scores and their softmax
    if (kv < q) attention += 2 * sequences * keys * q * e;  // grouped K/V repeated for every head
  } else {
    attention += heads * tokens * 4;  // log-sum-exp
  }
  const double matrices = m.mlp == MlpKind::kGated ? 3 : 2;
  double mlp = 0;
  if (!m.IsMoe() || m.dense_layers > 0) {
    // Gated: act(gate), up and their product alive at once; plain: the up projection and GELU.
    mlp = matrices * tokens * static_cast<double>(m.intermediate) / t * e;
  }
  if (m.IsMoe()) {
    // Experts run one after another on their tokens (HF's and vLLM's unfused paths): the output
    // accumulator, one expert's gathered inputs and intermediates (routing leaves an expert at
    // most about twice its even share), the shared expert's, and the router's fp32 scores.
    const double per_expert = std::min(tokens, std::ceil(2 * tokens * m.experts_per_token / m.experts));
    mlp = std::max(mlp, tokens * h * e + per_expert * (h + matrices * m.ExpertWidth() / t) * e +
                            matrices * tokens * static_cast<double>(m.shared_intermediate) / t * e +
                            tokens * m.experts * 4);
  }
  return 2 * tokens * h * e + std::max(attention, mlp);
}

}  // namespace

int64_t PromptTokens(const Workload& w) { return w.prompt > 0 ? std::min(w.prompt, w.context) : w.context; }

int64_t PrefillTokens(const Workload& w) {
  return std::max<int64_t>(1, std::min(w.batch * PromptTokens(w), w.prefill_chunk));
}

double StoredBytesPer(Precision p) { return BytesPer(p) + (p == Precision::kInt4 ? 2.0 / 128 : 0); }

// Korthikanti et al. count, for a GeLU MLP with i = 4h and 16-bit tensors,
// sbh(34 + 5as/h) = sbh(10 + 24/t + 5as/(ht)) bytes with tensor parallelism t; the terms below
// are theirs, written per tensor so the gated MLP (four s x i tensors), grouped-query K/V and the
// absence of dropout (no masks, one copy of the probabilities) follow from the shape.
double LayerActivationBytes(const ModelSpec& m, const Workload& w, const Layout& l, int64_t layer) {
  if (layer < 0) layer = m.layers - 1;
  const double s = static_cast<double>(w.seq), b = static_cast<double>(w.micro_batch);
  const double h = static_cast<double>(m.hidden), t = l.tp, e = ActivationBytes(w);
  // Autocast keeps the residual stream (norm inputs) in fp32 while matmuls save 16-bit inputs.
  const double e_residual = w.mixed == MixedPrecision::kAutocast && w.precision != Precision::kFp32 ? 4.0 : e;
  if (w.recompute == Recompute::kFull) return s * b * h * e_residual;  // the layer's input only

  const double q = static_cast<double>(m.QDim()), kv = static_cast<double>(m.KvDim());
  const double inter = static_cast<double>(m.TokenMlpWidth(layer));
  // Both norms' inputs and outputs, and the dropout masks: replicated across tensor-parallel
  // ranks unless sequence parallelism splits them. Under autocast each projection casts (and
  // saves) its own 16-bit copy of the norm's output: Q, K and V after the first norm, gate and
  // up after the second.
  const double t_seq = w.sequence_parallel ? t : 1;
  const double norm_output_copies = w.mixed == MixedPrecision::kAutocast && e_residual > e ? 5 : 2;
  const double norms = static_cast<double>(m.norms_per_layer) / 2;  // GPT-J's parallel block has one
  double bytes = norms * (2 * s * b * h * e_residual + norm_output_copies * s * b * h * e) / t_seq;
  if (w.dropout) bytes += 2 * s * b * h / t_seq;  // one-byte masks after attention and after the MLP
  // Split across ranks: Q, K, V (eager attention expands grouped K/V to every head), the
  // attention output, and the MLP's intermediates: a gated MLP's gate, up, activation and
  // product; a plain one's up projection and GELU output.
  const double kv_saved = w.attention == AttentionKernel::kEager ? q : kv;
  bytes += s * b * (q + 2 * kv_saved + q) * e / t;
  bytes += (m.mlp == MlpKind::kGated ? 4 : 2) * s * b * inter * e / t;
  if (m.IsMoeLayer(layer)) {
    // Each token's copies gathered for its experts and their weighted outputs (saved for the
    // routing weights' gradient), and the router's fp32 probabilities.
    bytes += 2 * s * b * m.experts_per_token * h * e / t + s * b * m.experts * 4;
  }
  if (w.recompute == Recompute::kNone && w.attention == AttentionKernel::kEager) {
    const double scores = static_cast<double>(m.heads) * s * s * b / t;
    bytes += scores * e;                       // softmax output, saved for softmax and for P x V
    if (w.dropout) bytes += scores * (1 + e);  // dropout mask and the dropped-out copy
  }
  if (w.attention == AttentionKernel::kFlash) bytes += static_cast<double>(m.heads) * s * b * 4 / t;  // log-sum-exp
  return bytes;
}

double BytesPer(Precision p) {
  switch (p) {
    case Precision::kFp64: return 8;
    case Precision::kFp32:
    case Precision::kTf32: return 4;
    case Precision::kBf16:
    case Precision::kFp16: return 2;
    case Precision::kFp8:
    case Precision::kInt8: return 1;
    case Precision::kInt4: return 0.5;
  }
  return 4;
}

double AllocatorSlackFraction(const Workload& w, Vendor vendor) {
  if (w.mode != Mode::kTrain || vendor == Vendor::kCpu) return 0;
  return 0.25;
}

absl::Status Validate(const Workload& w) {
  auto positive = [](const char* field, int64_t v) -> absl::Status {
    if (v > 0) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(field, " must be positive (got ", v, ")"));
  };
  if (w.mode == Mode::kTrain) {
    for (const auto& [field, v] : {std::pair<const char*, int64_t>{"micro_batch", w.micro_batch},
                                   {"seq", w.seq},
                                   {"grad_accum", w.grad_accum}}) {
      if (absl::Status s = positive(field, v); !s.ok()) return s;
    }
    if (w.global_batch_tokens < 0 || w.global_batch_tokens > (int64_t{1} << 34)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "global batch must be 0 (grad_accum as given) up to 2^34 tokens (got ", w.global_batch_tokens, ")"));
    }
    if (w.zero_stage < 0 || w.zero_stage > 3) {
      return absl::InvalidArgumentError(absl::StrCat("zero stage must be 0..3 (got ", w.zero_stage, ")"));
    }
    if (w.lora_rank < 0) return absl::InvalidArgumentError("lora_rank must not be negative");
    const bool quantised = w.precision == Precision::kInt8 || w.precision == Precision::kInt4;
    if (quantised && w.lora_rank == 0) {
      return absl::InvalidArgumentError(
          "full training in int8/int4 is not supported; train in bf16/fp16/fp8/fp32, or use --lora-rank "
          "for adapters on a quantised base (QLoRA)");
    }
    if (w.precision == Precision::kFp64) return absl::InvalidArgumentError("fp64 LLM training is not supported");
  } else {
    for (const auto& [field, v] : {std::pair<const char*, int64_t>{"batch", w.batch},
                                   {"context", w.context},
                                   {"prefill_chunk", w.prefill_chunk}}) {
      if (absl::Status s = positive(field, v); !s.ok()) return s;
    }
    if (w.prompt < 0 || w.prompt > w.context) {
      return absl::InvalidArgumentError(
          absl::StrCat("prompt must be between 1 and the context (", w.context, "; got ", w.prompt, ")"));
    }
    if (w.precision == Precision::kFp64) return absl::InvalidArgumentError("fp64 serving is not supported");
  }
  if (w.seq > (1 << 22) || w.context > (1 << 22) || w.micro_batch > (1 << 16) || w.batch > (1 << 20) ||
      w.prefill_chunk > (1 << 24) || w.grad_accum > (1 << 20) || w.lora_rank > (1 << 16)) {
    return absl::InvalidArgumentError("sequence, batch, accumulation or LoRA rank is implausibly large");
  }
  if (!(w.tokens >= 0) || w.tokens > 1e18) {
    return absl::InvalidArgumentError("tokens must be between 0 and 1e18");
  }
  return absl::OkStatus();
}

int64_t TrainableParams(const ModelSpec& model, const Workload& w) {
  return w.lora_rank > 0 ? LoraParams(model, w) : model.TotalParams();
}

MemoryBreakdown EstimateMemory(const ModelSpec& m, const Workload& w, const Layout& l) {
  MemoryBreakdown out;
  double embeddings = 0;  // of the stage's parameters, the embeddings (kept 16-bit when quantised)
  const double stage_params = StageParams(m, l, &embeddings);
  const double dp = l.dp;

  if (w.mode == Mode::kInfer) {
    const double quantised_embeddings = KeepsEmbeddingsIn16Bit(w.precision) ? embeddings : 0;
    out.weights = (stage_params - quantised_embeddings) * StoredBytesPer(w.precision) + quantised_embeddings * 2;
    const double layers = static_cast<double>(CeilDiv(m.layers, l.pp));
    const double kv_heads = std::max(1.0, static_cast<double>(m.kv_heads) / l.tp);  // replicated when tp > kv heads
    out.kv_cache =
        2 * layers * kv_heads * m.head_dim * static_cast<double>(w.context) * w.batch * BytesPer(w.kv_precision);
    // The larger of one prefill pass (a chunk of prompt tokens, each attending over at most the
    // prompt) and one decode step (a token per sequence attending over the whole context).
    const double prompt = static_cast<double>(PromptTokens(w)), chunk = static_cast<double>(PrefillTokens(w));
    const double b = static_cast<double>(w.batch);
    const double prefill = ServingLayerWorkspace(m, w, l, chunk, prompt, std::max(1.0, chunk / prompt));
    const double decode = ServingLayerWorkspace(m, w, l, b, static_cast<double>(w.context), b);
    out.activations = std::max(prefill, decode);
    out.transient = b * static_cast<double>(m.vocab) / l.tp * 4;  // the last tokens' logits, in fp32 for sampling
    return out;
  }

  // Model states per trained parameter.
  double weight_b = 0, grad_b = 0, master_b = 0, moment_b = 0, autocast_copy_b = 0;
  const Precision p = w.precision;
  switch (w.optimizer) {
    case Optimizer::kAdamW: moment_b = 8; break;
    case Optimizer::kSgdMomentum: moment_b = 4; break;
    case Optimizer::kSgd: moment_b = 0; break;
  }
  if (p == Precision::kFp32 || p == Precision::kTf32) {
    weight_b = 4, grad_b = 4;
  } else if (w.mixed == MixedPrecision::kAutocast) {
    weight_b = 4, grad_b = 4, autocast_copy_b = p == Precision::kFp8 ? 1 : 2;
  } else {
    weight_b = 2, grad_b = 2, master_b = 4;
    if (p == Precision::kFp8) autocast_copy_b = 1;  // fp8 copies of the weights for the GEMMs
  }

  double trained = stage_params, frozen = 0;
  if (w.lora_rank > 0) {
    trained = static_cast<double>(LoraParams(m, w)) / (l.tp * l.pp);
    frozen = stage_params;
    // Quantised or fp8 bases compute adapters in bf16 with fp32 masters.
    if (p == Precision::kInt8 || p == Precision::kInt4 || p == Precision::kFp8) {
      weight_b = 2, grad_b = 2, master_b = 4, autocast_copy_b = 0;
    }
  }
  const double shard_optimizer = w.zero_stage >= 1 ? dp : 1;
  const double shard_grads = w.zero_stage >= 2 ? dp : 1;
  const double shard_weights = w.zero_stage >= 3 ? dp : 1;
  const double frozen_b = StoredBytesPer(p);
  // Autocast copies every matmul weight but not the input embedding.
  const double autocast_params =
      std::max(0.0, trained - (w.lora_rank > 0 ? 0.0 : static_cast<double>(m.InputEmbeddingParams()) / l.tp));
  double frozen_bytes = frozen * frozen_b;
  if (frozen > 0 && KeepsEmbeddingsIn16Bit(p)) {  // a quantised base keeps its embeddings in 16 bits
    frozen_bytes += embeddings * (2 - frozen_b);
  }
  out.weights = (trained * weight_b + frozen_bytes) / shard_weights + autocast_params * autocast_copy_b;
  // ZeRO-3 in mixed precision keeps the reduced gradient partition in fp32 for the optimizer
  // (DeepSpeed's fp32 partitioned groups): 2 + 4 + 4 + 8 = 18 bytes per parameter over the
  // replicas, what estimate_zero3_model_states_mem_needs counts (the ZeRO paper's 16 counts a
  // 16-bit partition).
  const bool fp32_grad_partition = w.zero_stage == 3 && l.dp > 1 && master_b > 0;
  out.gradients = trained * (fp32_grad_partition ? 4 : grad_b) / shard_grads;
  out.master = trained * master_b / shard_optimizer;
  out.optimizer = trained * moment_b / shard_optimizer;

  // 1F1B keeps min(pp, micro-batches) micro-batches in flight on the first stage.
  const double in_flight = static_cast<double>(std::min<int64_t>(l.pp, w.grad_accum));
  // Layers differ only where a MoE model keeps leading dense layers.
  const int64_t first_stage = CeilDiv(m.layers, l.pp);
  const int64_t dense_here = std::min<int64_t>(m.IsMoe() ? m.dense_layers : 0, first_stage);
  out.activations = in_flight * (dense_here * LayerActivationBytes(m, w, l, 0) +
                                 (first_stage - dense_here) * LayerActivationBytes(m, w, l, m.layers - 1));
  const double s = static_cast<double>(w.seq), b = static_cast<double>(w.micro_batch), e = ActivationBytes(w);
  if (w.recompute == Recompute::kFull) {
    Workload full = w;
    full.recompute = Recompute::kSelective;
    out.activations += LayerActivationBytes(m, full, l);  // one layer recomputed during backward
  }
  out.activations += 2 * s * b * m.hidden * e;  // final norm
  // The loss, computed in fp32 as usual: when backward starts, the log-softmax saved for it,
  // the gradient arriving and the gradient it produces for the logits are alive at once.
  const double logits = s * b * static_cast<double>(m.vocab) / l.tp;
  out.transient = logits * 12;
  if (w.zero_stage == 3 && l.dp > 1) {
    // Gathered weights and their gradients.
    out.transient += static_cast<double>(m.LargestMatrixParams()) / l.tp * (weight_b + grad_b);
  }
  return out;
}

}  // namespace hetpool::planner
