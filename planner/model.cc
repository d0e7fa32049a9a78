#include "planner/model.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace hetpool::planner {
namespace {

ModelSpec Dense(std::string name, int64_t layers, int64_t hidden, int64_t heads, int64_t kv_heads, int64_t intermediate,
                int64_t vocab, int64_t context, bool qkv_bias = false) {
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

// The GPT-2 / GPT-J / GPT-NeoX block: LayerNorm, a GELU MLP of two projections with biases.
ModelSpec GptStyle(ModelSpec m, absl::string_view family) {
  m.family = std::string(family);
  m.norm = NormKind::kLayer;
  m.mlp = MlpKind::kPlain;
  m.mlp_bias = true;
  if (family == "gpt2") {
    m.positions = PositionKind::kLearned;
    m.attention_bias = true;
    m.tied_embeddings = true;
  } else if (family == "gptj") {
    m.norms_per_layer = 1;
    m.lm_head_bias = true;
  } else {  // gpt_neox
    m.attention_bias = true;
  }
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
      Dense("mistral-7b", 32, 4096, 32, 8, 14336, 32000, 32768),
      Dense("qwen2-7b", 28, 3584, 28, 4, 18944, 152064, 32768, /*qkv_bias=*/true),
      Dense("qwen2-72b", 80, 8192, 64, 8, 29568, 152064, 32768, /*qkv_bias=*/true),
      // ChatGLM3: multi-query groups of 2 with kv_channels 128, fused gated MLP, padded vocabulary.
      Dense("chatglm3-6b", 28, 4096, 32, 2, 13696, 65024, 8192, /*qkv_bias=*/true),
      Dense("phi-3-mini", 32, 3072, 32, 32, 8192, 32064, 4096),
      GptStyle(Dense("gpt2", 12, 768, 12, 12, 3072, 50257, 1024), "gpt2"),
      GptStyle(Dense("gpt2-xl", 48, 1600, 25, 25, 6400, 50257, 1024), "gpt2"),
      GptStyle(Dense("gpt-j-6b", 28, 4096, 16, 16, 16384, 50400, 2048), "gptj"),
      GptStyle(Dense("gpt-neox-20b", 44, 6144, 64, 64, 24576, 50432, 2048), "gpt_neox"),
  };
  for (ModelSpec& m : p) {
    if (m.name.starts_with("qwen2")) m.family = "qwen2";
    if (m.name.starts_with("chatglm")) m.family = "chatglm";
    if (m.name.starts_with("mistral")) m.family = "mistral";
    if (m.name.starts_with("phi-3")) m.family = "phi3";
  }
  ModelSpec gemma = Dense("gemma-7b", 28, 3072, 16, 16, 24576, 256000, 8192);
  gemma.family = "gemma", gemma.head_dim = 256, gemma.tied_embeddings = true;
  p.push_back(gemma);
  ModelSpec mixtral = Dense("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 32768);
  mixtral.family = "mixtral", mixtral.experts = 8, mixtral.experts_per_token = 2;
  p.push_back(mixtral);
  ModelSpec qwen_moe = Dense("qwen1.5-moe-a2.7b", 24, 2048, 16, 16, 5632, 151936, 8192, /*qkv_bias=*/true);
  qwen_moe.family = "qwen2_moe", qwen_moe.experts = 60, qwen_moe.experts_per_token = 4;
  qwen_moe.expert_intermediate = 1408, qwen_moe.shared_intermediate = 5632, qwen_moe.shared_expert_gate = true;
  p.push_back(qwen_moe);
  ModelSpec deepseek = Dense("deepseek-moe-16b", 28, 2048, 16, 16, 10944, 102400, 4096);
  deepseek.family = "deepseek", deepseek.experts = 64, deepseek.experts_per_token = 6;
  deepseek.expert_intermediate = 1408, deepseek.shared_intermediate = 2 * 1408, deepseek.dense_layers = 1;
  p.push_back(deepseek);
  return p;
}

// Reads an integer field; absent or null -> fallback (or an error naming the key when required).
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

// Stores a field read by IntField, or passes its error on.
absl::Status set(int64_t& out, absl::StatusOr<int64_t> v) {
  if (!v.ok()) return v.status();
  out = *v;
  return absl::OkStatus();
}

bool BoolField(const nlohmann::json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

int64_t NormParams(const ModelSpec& m) { return m.norm == NormKind::kLayer ? 2 * m.hidden : m.hidden; }

int64_t MlpParams(const ModelSpec& m, int64_t width) {
  if (width <= 0) return 0;
  if (m.mlp == MlpKind::kGated) return 3 * m.hidden * width + (m.mlp_bias ? 2 * width + m.hidden : 0);
  return 2 * m.hidden * width + (m.mlp_bias ? width + m.hidden : 0);
}

int64_t AttentionParams(const ModelSpec& m) {
  const int64_t weights = m.hidden * m.QDim() + 2 * m.hidden * m.KvDim() + m.QDim() * m.hidden;
  const int64_t qkv = m.QDim() + 2 * m.KvDim();
  return weights + (m.attention_bias ? qkv + m.hidden : m.qkv_bias ? qkv : 0);
}

// Sets the GPT-family fields of a config.json (gpt2, gptj, gpt_neox).
absl::Status ReadGptStyle(const nlohmann::json& j, const std::string& type, ModelSpec& m) {
  absl::Status s;
  if (!(s = set(m.layers, IntField(j, FirstKey(j, {"n_layer", "num_hidden_layers"}), {}))).ok()) return s;
  if (!(s = set(m.hidden, IntField(j, FirstKey(j, {"n_embd", "hidden_size"}), {}))).ok()) return s;
  if (!(s = set(m.heads, IntField(j, FirstKey(j, {"n_head", "num_attention_heads"}), {}))).ok()) return s;
  if (m.heads <= 0) return absl::InvalidArgumentError("config.json: the head count must be positive");
  m.kv_heads = m.heads;
  m.head_dim = m.hidden / m.heads;
  // GPT-2 and GPT-J write "n_inner": null for the default 4 x hidden.
  if (!(s = set(m.intermediate, IntField(j, FirstKey(j, {"n_inner", "intermediate_size"}), 4 * m.hidden))).ok())
    return s;
  if (!(s = set(m.vocab, IntField(j, "vocab_size", {}))).ok()) return s;
  if (!(s = set(m.max_context, IntField(j, FirstKey(j, {"n_positions", "max_position_embeddings"}),
                                        type == "gpt2" ? std::optional<int64_t>() : 0)))
           .ok()) {
    return s;
  }
  m = GptStyle(m, type);
  m.tied_embeddings = BoolField(j, "tie_word_embeddings", m.tied_embeddings);
  if (type == "gpt_neox") m.attention_bias = BoolField(j, "attention_bias", true);
  return absl::OkStatus();
}

}  // namespace

int64_t ModelSpec::TokenMlpWidth(int64_t layer) const {
  if (!IsMoeLayer(layer)) return intermediate;
  return experts_per_token * ExpertWidth() + shared_intermediate;
}

int64_t ModelSpec::LayerParams(int64_t layer, bool active_only) const {
  const int64_t common = AttentionParams(*this) + norms_per_layer * NormParams(*this);
  if (!IsMoeLayer(layer)) return common + MlpParams(*this, intermediate);
  const int64_t routed = active_only ? experts_per_token : experts;
  return common + routed * MlpParams(*this, ExpertWidth()) + hidden * experts + MlpParams(*this, shared_intermediate) +
         (shared_expert_gate ? hidden : 0);
}

int64_t ModelSpec::LayersParams(int64_t first, int64_t count, bool active_only) const {
  const int64_t last = std::min(layers, first + count);
  const int64_t dense = std::clamp<int64_t>(std::min(dense_layers, last) - first, 0, count);
  const int64_t rest = std::max<int64_t>(0, last - first - dense);
  int64_t sum = 0;
  if (dense > 0) sum += dense * LayerParams(0, active_only);
  if (rest > 0) sum += rest * LayerParams(layers - 1, active_only);
  return sum;
}

int64_t ModelSpec::InputEmbeddingParams() const {
  return vocab * hidden + (positions == PositionKind::kLearned ? max_context * hidden : 0);
}

int64_t ModelSpec::EmbeddingParams() const {
  return InputEmbeddingParams() + (tied_embeddings ? 0 : vocab * hidden) + (lm_head_bias ? vocab : 0);
}

int64_t ModelSpec::FinalNormParams() const { return NormParams(*this); }

int64_t ModelSpec::TotalParams() const {
  return LayersParams(0, layers, false) + EmbeddingParams() + FinalNormParams();
}

int64_t ModelSpec::ActiveParams() const {
  return LayersParams(0, layers, true) + EmbeddingParams() + FinalNormParams();
}

int64_t ModelSpec::LargestMatrixParams() const {
  const int64_t widest = std::max({intermediate, IsMoe() ? ExpertWidth() : 0, shared_intermediate});
  return std::max({hidden * widest, vocab * hidden, hidden * QDim()});
}

absl::Status Validate(const ModelSpec& m) {
  const std::pair<const char*, int64_t> positive[] = {{"layers", m.layers},     {"hidden", m.hidden},
                                                      {"heads", m.heads},       {"kv_heads", m.kv_heads},
                                                      {"head_dim", m.head_dim}, {"intermediate", m.intermediate},
                                                      {"vocab", m.vocab}};
  for (const auto& [field, value] : positive) {
    if (value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("model '", m.name, "': ", field, " must be positive (got ", value, ")"));
    }
  }
  if (m.heads % m.kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model '", m.name, "': heads (", m.heads, ") must be a multiple of kv_heads (", m.kv_heads, ")"));
  }
  if (m.experts < 0 || m.experts_per_token < 0 ||
      (m.experts > 0 && (m.experts_per_token <= 0 || m.experts_per_token > m.experts))) {
    return absl::InvalidArgumentError(absl::StrCat("model '", m.name, "': experts_per_token must be in 1..experts (",
                                                   m.experts_per_token, " of ", m.experts, ")"));
  }
  if (m.expert_intermediate < 0 || m.shared_intermediate < 0 || m.dense_layers < 0 || m.dense_layers > m.layers ||
      m.norms_per_layer < 0 || m.norms_per_layer > 4 || m.max_context < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model '", m.name,
                     "': expert widths, dense layers (0..layers), norms per layer (0..4) and context must "
                     "not be negative"));
  }
  if (m.positions == PositionKind::kLearned && m.max_context <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model '", m.name, "': learned positions need the table's size (max_context)"));
  }
  // Guards the int64 arithmetic downstream: no real model is near 2^50 parameters.
  if (m.layers > 10000 || m.hidden > (1 << 20) || m.intermediate > (1 << 22) || m.vocab > (1 << 24) || m.heads > 4096 ||
      m.experts > 4096 || m.expert_intermediate > (1 << 22) || m.shared_intermediate > (1 << 22) ||
      m.head_dim > (1 << 16) || m.max_context > (1 << 24)) {
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

const std::vector<std::string>& KnownFamilies() {
  static const std::vector<std::string> families = {"gpt2",  "gptj", "gpt_neox", "llama",   "mistral",   "qwen2",
                                                    "gemma", "phi3", "chatglm",  "mixtral", "qwen2_moe", "deepseek"};
  return families;
}

absl::StatusOr<ModelSpec> ParseHfConfig(absl::string_view json_text, absl::string_view name) {
  const nlohmann::json j =
      nlohmann::json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("config.json is not valid JSON");
  if (!j.is_object()) return absl::InvalidArgumentError("config.json must be a JSON object");
  const std::string type =
      j.contains("model_type") && j["model_type"].is_string() ? j["model_type"].get<std::string>() : "";

  ModelSpec m;
  m.name = std::string(name);
  m.family = type.empty() ? "llama" : type;
  if (type == "gpt2" || type == "gptj" || type == "gpt_neox") {
    if (absl::Status s = ReadGptStyle(j, type, m); !s.ok()) return s;
    if (absl::Status v = Validate(m); !v.ok()) return v;
    return m;
  }
  if (j.contains("kv_lora_rank") && !j["kv_lora_rank"].is_null()) {
    return absl::InvalidArgumentError(absl::StrCat("config.json: model_type '", type,
                                                   "' uses multi-head latent attention (kv_lora_rank: DeepSeek-V2/V3), "
                                                   "which the planner does not model; known: ",
                                                   absl::StrJoin(KnownFamilies(), ", ")));
  }
  absl::Status s;
  if (!(s = set(m.layers, IntField(j, FirstKey(j, {"num_hidden_layers", "num_layers", "n_layer"}), {}))).ok()) return s;
  if (!(s = set(m.hidden, IntField(j, FirstKey(j, {"hidden_size", "n_embd"}), {}))).ok()) return s;
  if (!(s = set(m.heads, IntField(j, FirstKey(j, {"num_attention_heads", "n_head"}), {}))).ok()) return s;
  if (m.heads <= 0) return absl::InvalidArgumentError("config.json: num_attention_heads must be positive");
  // ChatGLM: multi_query_group_num KV groups of kv_channels each.
  const bool glm = type == "chatglm" || j.contains("multi_query_group_num");
  if (!(s = set(m.kv_heads, IntField(j, FirstKey(j, {"num_key_value_heads", "multi_query_group_num"}), m.heads))).ok())
    return s;
  if (!(s = set(m.head_dim, IntField(j, FirstKey(j, {"head_dim", "kv_channels"}), m.hidden / m.heads))).ok()) return s;
  if (!(s = set(m.intermediate, IntField(j, FirstKey(j, {"intermediate_size", "ffn_hidden_size", "n_inner"}), {})))
           .ok())
    return s;
  if (!(s = set(m.vocab, IntField(j, FirstKey(j, {"vocab_size", "padded_vocab_size"}), {}))).ok()) return s;
  if (glm && j.contains("padded_vocab_size")) {
    if (!(s = set(m.vocab, IntField(j, "padded_vocab_size", {}))).ok()) return s;
  }
  if (!(s = set(m.experts, IntField(j, FirstKey(j, {"num_local_experts", "num_experts", "n_routed_experts"}), 0))).ok())
    return s;
  if (!(s = set(m.experts_per_token, IntField(j, "num_experts_per_tok", m.experts > 0 ? 2 : 0))).ok()) return s;
  if (!(s = set(m.max_context, IntField(j, FirstKey(j, {"max_position_embeddings", "seq_length"}), 0))).ok()) return s;
  if (m.experts > 0) {
    // Qwen-MoE and DeepSeek name the routed experts' width apart from the dense width.
    if (!(s = set(m.expert_intermediate, IntField(j, "moe_intermediate_size", 0))).ok()) return s;
    if (type == "qwen2_moe") {
      int64_t step = 1;
      if (!(s = set(step, IntField(j, "decoder_sparse_step", 1))).ok()) return s;
      const bool dense_layers_listed =
          j.contains("mlp_only_layers") && j["mlp_only_layers"].is_array() && !j["mlp_only_layers"].empty();
      if (step != 1 || dense_layers_listed) {
        return absl::InvalidArgumentError(
            "config.json: qwen2_moe with decoder_sparse_step != 1 or mlp_only_layers (dense layers between the "
            "sparse ones) is not modelled");
      }
      if (!(s = set(m.shared_intermediate, IntField(j, "shared_expert_intermediate_size", 0))).ok()) return s;
      m.shared_expert_gate = m.shared_intermediate > 0;
    } else if (type == "deepseek") {
      int64_t shared = 0, freq = 1;
      if (!(s = set(shared, IntField(j, "n_shared_experts", 0))).ok()) return s;
      if (!(s = set(freq, IntField(j, "moe_layer_freq", 1))).ok()) return s;
      if (!(s = set(m.dense_layers, IntField(j, "first_k_dense_replace", 0))).ok()) return s;
      if (freq != 1) {
        return absl::InvalidArgumentError("config.json: deepseek with moe_layer_freq != 1 is not modelled");
      }
      m.shared_intermediate = shared * m.ExpertWidth();
    }
  }
  // What each family leaves out of its config: GPT-2 and Gemma tie their embeddings by default.
  m.tied_embeddings = BoolField(j, "tie_word_embeddings", type == "gemma");
  m.qkv_bias = type == "qwen2" || type == "qwen2_moe" || BoolField(j, "add_qkv_bias", false);
  // Llama's attention_bias puts biases on the output projection too.
  m.attention_bias = BoolField(j, "attention_bias", false);
  m.mlp_bias = BoolField(j, "mlp_bias", false);
  if (absl::Status v = Validate(m); !v.ok()) return v;
  return m;
}

}  // namespace hetpool::planner
