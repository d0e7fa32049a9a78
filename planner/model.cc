#include "planner/model.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace hetpool::planner {
namespace {

ModelSpec Dense(std::string name, int64_t layers, int64_t hidden, int64_t heads, int64_t kv_heads,
                int64_t intermediate, int64_t vocab, int64_t context, bool qkv_bias = false) {
  ModelSpec m;
  m.name = std::move(name);
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.head_dim = hidden / heads;
  m.intermediate = intermediate;
  m.vocab = vocab;
  m.max_context = context;
  m.qkv_bias = qkv_bias;
  return m;
}

// Figures from each model's published config.json.
std::vector<ModelSpec> BuildPresets() {
  std::vector<ModelSpec> p = {
      Dense("llama-2-7b", 32, 4096, 32, 32, 11008, 32000, 4096),
      Dense("llama-2-13b", 40, 5120, 40, 40, 13824, 32000, 4096),
      Dense("llama-2-70b", 80, 8192, 64, 8, 28672, 32000, 4096),
      Dense("llama-3-8b", 32, 4096, 32, 8, 14336, 128256, 8192),
      Dense("llama-3-70b", 80, 8192, 64, 8, 28672, 128256, 8192),
      Dense("qwen2-7b", 28, 3584, 28, 4, 18944, 152064, 32768, /*qkv_bias=*/true),
      Dense("qwen2-72b", 80, 8192, 64, 8, 29568, 152064, 32768, /*qkv_bias=*/true),
      // ChatGLM3: multi-query groups of 2 with kv_channels 128, fused gated MLP, padded vocabulary.
      Dense("chatglm3-6b", 28, 4096, 32, 2, 13696, 65024, 8192, /*qkv_bias=*/true),
  };
  ModelSpec mixtral = Dense("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 32768);
  mixtral.experts = 8;
  mixtral.experts_per_token = 2;
  p.push_back(mixtral);
  return p;
}

// Reads an integer field; absent -> fallback (or an error naming the key when required).
absl::StatusOr<int64_t> IntField(const nlohmann::json& j, const char* key, std::optional<int64_t> fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (fallback) return *fallback;
    return absl::InvalidArgumentError(absl::StrCat("config.json: missing \"", key, "\""));
  }
  if (!it->is_number_integer()) {
    return absl::InvalidArgumentError(absl::StrCat("config.json: \"", key, "\" must be an integer"));
  }
  return it->get<int64_t>();
}

// First key present among the alternatives (model families name the same figure differently).
const char* FirstKey(const nlohmann::json& j, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    if (j.contains(k)) return k;
  }
  return *keys.begin();
}

bool BoolField(const nlohmann::json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

}  // namespace

int64_t ModelSpec::LayerParams(bool active_only) const {
  const int64_t attention = hidden * QDim() + 2 * hidden * KvDim() + QDim() * hidden +
                            (qkv_bias ? QDim() + 2 * KvDim() : 0);
  const int64_t norms = 2 * hidden;
  const int64_t one_mlp = 3 * hidden * intermediate;
  if (experts <= 0) return attention + norms + one_mlp;
  const int64_t routed = active_only ? experts_per_token : experts;
  return attention + norms + routed * one_mlp + hidden * experts;
}

int64_t ModelSpec::EmbeddingParams() const { return vocab * hidden * (tied_embeddings ? 1 : 2); }

int64_t ModelSpec::TotalParams() const { return layers * LayerParams(false) + EmbeddingParams() + hidden; }

int64_t ModelSpec::ActiveParams() const { return layers * LayerParams(true) + EmbeddingParams() + hidden; }

absl::Status Validate(const ModelSpec& m) {
  const std::pair<const char*, int64_t> positive[] = {
      {"layers", m.layers}, {"hidden", m.hidden},     {"heads", m.heads},         {"kv_heads", m.kv_heads},
      {"head_dim", m.head_dim}, {"intermediate", m.intermediate}, {"vocab", m.vocab}};
  for (const auto& [field, value] : positive) {
    if (value <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("model '", m.name, "': ", field, " must be positive (got ",
                                                     value, ")"));
    }
  }
  if (m.heads % m.kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("model '", m.name, "': heads (", m.heads,
                                                   ") must be a multiple of kv_heads (", m.kv_heads, ")"));
  }
  if (m.experts < 0 || m.experts_per_token < 0 || (m.experts > 0 && (m.experts_per_token <= 0 ||
                                                                    m.experts_per_token > m.experts))) {
    return absl::InvalidArgumentError(absl::StrCat("model '", m.name, "': experts_per_token must be in 1..experts (",
                                                   m.experts_per_token, " of ", m.experts, ")"));
  }
  // Guards the int64 arithmetic downstream: no real model is near 2^50 parameters.
  if (m.layers > 10000 || m.hidden > (1 << 20) || m.intermediate > (1 << 22) || m.vocab > (1 << 24) ||
      m.heads > 4096 || m.experts > 4096) {
    return absl::InvalidArgumentError(absl::StrCat("model '", m.name, "': dimensions are implausibly large"));
  }
  return absl::OkStatus();
}

const std::vector<ModelSpec>& Presets() {
  static const std::vector<ModelSpec> presets = BuildPresets();
  return presets;
}

absl::StatusOr<ModelSpec> FindPreset(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  std::vector<std::string> known;
  for (const ModelSpec& m : Presets()) {
    if (m.name == lower) return m;
    known.push_back(m.name);
  }
  return absl::NotFoundError(absl::StrCat("unknown model preset '", name, "'; known: ", absl::StrJoin(known, ", "),
                                          " (or pass --config config.json, or explicit dimensions)"));
}

absl::StatusOr<ModelSpec> ParseHfConfig(absl::string_view json_text, absl::string_view name) {
  const nlohmann::json j = nlohmann::json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("config.json is not valid JSON");
  if (!j.is_object()) return absl::InvalidArgumentError("config.json must be a JSON object");
  const std::string type = j.contains("model_type") && j["model_type"].is_string() ? j["model_type"].get<std::string>() : "";

  ModelSpec m;
  m.name = std::string(name);
  auto set = [](int64_t& out, absl::StatusOr<int64_t> v) -> absl::Status {
    if (!v.ok()) return v.status();
    out = *v;
    return absl::OkStatus();
  };
  absl::Status s;
  if (!(s = set(m.layers, IntField(j, FirstKey(j, {"num_hidden_layers", "num_layers", "n_layer"}), {}))).ok()) return s;
  if (!(s = set(m.hidden, IntField(j, FirstKey(j, {"hidden_size", "n_embd"}), {}))).ok()) return s;
  if (!(s = set(m.heads, IntField(j, FirstKey(j, {"num_attention_heads", "n_head"}), {}))).ok()) return s;
  if (m.heads <= 0) return absl::InvalidArgumentError("config.json: num_attention_heads must be positive");
  // ChatGLM: multi_query_group_num KV groups of kv_channels each.
  const bool glm = type == "chatglm" || j.contains("multi_query_group_num");
  if (!(s = set(m.kv_heads, IntField(j, FirstKey(j, {"num_key_value_heads", "multi_query_group_num"}), m.heads))).ok()) return s;
  if (!(s = set(m.head_dim, IntField(j, FirstKey(j, {"head_dim", "kv_channels"}), m.hidden / m.heads))).ok()) return s;
  if (!(s = set(m.intermediate, IntField(j, FirstKey(j, {"intermediate_size", "ffn_hidden_size", "n_inner"}), {}))).ok()) return s;
  if (!(s = set(m.vocab, IntField(j, FirstKey(j, {"vocab_size", "padded_vocab_size"}), {}))).ok()) return s;
  if (glm && j.contains("padded_vocab_size")) {
    if (!(s = set(m.vocab, IntField(j, "padded_vocab_size", {}))).ok()) return s;
  }
  if (!(s = set(m.experts, IntField(j, FirstKey(j, {"num_local_experts", "num_experts"}), 0))).ok()) return s;
  if (!(s = set(m.experts_per_token, IntField(j, "num_experts_per_tok", m.experts > 0 ? 2 : 0))).ok()) return s;
  if (!(s = set(m.max_context, IntField(j, FirstKey(j, {"max_position_embeddings", "seq_length"}), 0))).ok()) return s;
  m.tied_embeddings = BoolField(j, "tie_word_embeddings", false);
  m.qkv_bias = type == "qwen2" || BoolField(j, "add_qkv_bias", false) || BoolField(j, "attention_bias", false);
  if (absl::Status v = Validate(m); !v.ok()) return v;
  return m;
}

}  // namespace hetpool::planner
