// What a language model is, in the figures that decide its memory and compute: layers, widths,
// heads, vocabulary, experts, and the architecture choices that change the parameter count
// (norm kind, MLP kind, positions, biases, shared experts). Comes from a named preset, explicit
// fields or a Hugging Face config.json. Parameter counts are computed from the shape (never typed
// in): the presets reproduce the published counts exactly, and every family read from a real
// config.json matches sum(p.numel()) of the instantiated model (tests/unit/planner_test.cc,
// tests/python/param_count_test.py).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hetpool::planner {

enum class NormKind { kRms, kLayer };           // LayerNorm carries a bias beside its weight
enum class MlpKind { kGated, kPlain };          // gated: gate, up, down (SwiGLU, GeGLU); plain: up, down (GELU)
enum class PositionKind { kRotary, kLearned };  // learned: a max_context x hidden table (GPT-2)

// A decoder-only transformer. The defaults are the Llama shape (pre-norm RMSNorm, rotary
// positions, grouped-query attention, SwiGLU, no biases); the other families set the fields that
// differ. Mixture-of-experts models replace the MLP of every layer after `dense_layers` with
// `experts` routed MLPs (`experts_per_token` run per token) plus optional always-on shared ones.
struct ModelSpec {
  std::string name;
  std::string family = "llama";  // config.json's model_type, or the preset's
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;      // grouped-query attention; = heads for plain multi-head attention
  int64_t head_dim = 0;      // usually hidden / heads
  int64_t intermediate = 0;  // MLP width of a dense layer
  int64_t vocab = 0;
  NormKind norm = NormKind::kRms;
  MlpKind mlp = MlpKind::kGated;
  PositionKind positions = PositionKind::kRotary;
  bool tied_embeddings = false;  // output projection shares the input embedding
  bool qkv_bias = false;         // biases on Q, K and V only (Qwen2, ChatGLM)
  bool attention_bias = false;   // biases on Q, K, V and the output projection (GPT-2, NeoX)
  bool mlp_bias = false;         // biases on the MLP's projections (GPT-2, GPT-J, NeoX)
  bool lm_head_bias = false;     // GPT-J's output projection has a bias
  int64_t norms_per_layer = 2;   // GPT-J's parallel block reads one norm for attention and MLP
  int64_t experts = 0;           // routed experts per MoE layer; 0 = dense
  int64_t experts_per_token = 0;
  int64_t expert_intermediate = 0;  // width of one routed expert; 0 = intermediate
  int64_t shared_intermediate = 0;  // width of the always-on shared expert(s) together; 0 = none
  bool shared_expert_gate = false;  // Qwen-MoE scales the shared expert by a learned gate (hidden x 1)
  int64_t dense_layers = 0;         // leading layers that keep a dense MLP (DeepSeek's first_k_dense_replace)
  int64_t max_context = 0;          // 0 = unknown; the learned position table's rows

  int64_t KvDim() const { return kv_heads * head_dim; }
  int64_t QDim() const { return heads * head_dim; }
  bool IsMoe() const { return experts > 0; }
  bool IsMoeLayer(int64_t layer) const { return experts > 0 && layer >= dense_layers; }
  int64_t ExpertWidth() const { return expert_intermediate > 0 ? expert_intermediate : intermediate; }
  // MLP width one token passes through in a layer: the dense width, or its routed experts' plus
  // the shared ones'. What activations and FLOPs scale with.
  int64_t TokenMlpWidth(int64_t layer) const;
  // Parameters of layer `layer` (0-based): all experts (memory) or the routed ones (compute).
  int64_t LayerParams(int64_t layer, bool active_only) const;
  // Sum over layers [first, first + count).
  int64_t LayersParams(int64_t first, int64_t count, bool active_only) const;
  int64_t EmbeddingParams() const;       // input embedding, learned positions, an untied output projection
  int64_t InputEmbeddingParams() const;  // what the first pipeline stage holds of them
  int64_t FinalNormParams() const;
  int64_t TotalParams() const;   // what memory must hold
  int64_t ActiveParams() const;  // what one token computes with (= total for dense models)
  // The largest single weight matrix: what ZeRO-3 gathers at a time.
  int64_t LargestMatrixParams() const;
};

// Checks the shape is complete and consistent (heads divide, positive sizes), naming the field.
absl::Status Validate(const ModelSpec& model);

const std::vector<ModelSpec>& Presets();
// Case-insensitive; an unknown name lists the known ones.
absl::StatusOr<ModelSpec> FindPreset(absl::string_view name);

// Reads a Hugging Face config.json by its model_type: gpt2, gptj, gpt_neox, llama, mistral,
// qwen2, gemma, phi3, chatglm, mixtral, qwen2_moe, deepseek (v1). Another model_type with the
// Llama key set is read as a Llama-style model; DeepSeek-V2/V3's latent attention is refused.
absl::StatusOr<ModelSpec> ParseHfConfig(absl::string_view json_text, absl::string_view name);

// The model_types ParseHfConfig reads by name.
const std::vector<std::string>& KnownFamilies();

}  // namespace hetpool::planner
