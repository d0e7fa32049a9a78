// What a language model is, in the figures that decide its memory and compute: layers, widths,
// heads, vocabulary, experts. Comes from a named preset, explicit fields or a Hugging Face
// config.json. Parameter counts are computed from the shape (never typed in), and the presets'
// shapes reproduce the published parameter counts exactly (tests/unit/planner_model_test.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hetpool::planner {

// A decoder-only transformer with pre-norm (RMSNorm), rotary positions, grouped-query attention
// and a gated (SwiGLU) MLP: the shape of every model the presets name. Mixture-of-experts models
// replace the MLP with `experts` MLPs and a router, `experts_per_token` of which run per token.
struct ModelSpec {
  std::string name;
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;      // grouped-query attention; = heads for plain multi-head attention
  int64_t head_dim = 0;      // usually hidden / heads
  int64_t intermediate = 0;  // MLP width (per expert)
  int64_t vocab = 0;
  bool tied_embeddings = false;  // output projection shares the input embedding
  bool qkv_bias = false;         // Qwen2 and ChatGLM carry biases on Q, K and V
  int64_t experts = 0;           // 0 = dense
  int64_t experts_per_token = 0;
  int64_t max_context = 0;       // 0 = unknown

  int64_t KvDim() const { return kv_heads * head_dim; }
  int64_t QDim() const { return heads * head_dim; }
  // Parameters of one transformer layer: all experts (memory) or the routed ones (compute).
  int64_t LayerParams(bool active_only) const;
  int64_t EmbeddingParams() const;  // input embedding plus an untied output projection
  int64_t TotalParams() const;      // what memory must hold
  int64_t ActiveParams() const;     // what one token computes with (= total for dense models)
};

// Checks the shape is complete and consistent (heads divide, positive sizes), naming the field.
absl::Status Validate(const ModelSpec& model);

const std::vector<ModelSpec>& Presets();
// Case-insensitive; an unknown name lists the known ones.
absl::StatusOr<ModelSpec> FindPreset(absl::string_view name);

// Reads a Hugging Face config.json (llama, mistral, mixtral, qwen2, chatglm key sets).
absl::StatusOr<ModelSpec> ParseHfConfig(absl::string_view json_text, absl::string_view name);

}  // namespace hetpool::planner
