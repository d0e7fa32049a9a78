// The LLM planner against hand-computed values and published figures (each cited where used).
#include <gtest/gtest.h>

#include "drivers/fingerprint/fingerprint.h"
#include "drivers/fingerprint/spec_table.h"
#include "planner/memory.h"
#include "planner/model.h"
#include "planner/planner.h"
#include "planner/pool.h"

namespace hetpool::planner {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

ModelSpec Preset(const char* name) {
  auto m = FindPreset(name);
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

// Published parameter counts (Hugging Face model cards / safetensors index totals). The presets
// store shapes only, so these pin down every figure of every preset.
TEST(PlannerModel, PresetsReproducePublishedParameterCounts) {
  const std::pair<const char*, int64_t> published[] = {
      {"llama-2-7b", 6'738'415'616},   {"llama-2-13b", 13'015'864'320}, {"llama-2-70b", 68'976'648'192},
      {"llama-3-8b", 8'030'261'248},   {"llama-3-70b", 70'553'706'496}, {"qwen2-7b", 7'615'616'512},
      {"qwen2-72b", 72'706'203'648},   {"chatglm3-6b", 6'243'584'000},  {"mixtral-8x7b", 46'702'792'704},
  };
  for (const auto& [name, params] : published) EXPECT_EQ(Preset(name).TotalParams(), params) << name;
  // Mixtral routes each token through 2 of 8 experts: 12.9B active parameters (Mistral AI).
  EXPECT_EQ(Preset("mixtral-8x7b").ActiveParams(), 12'879'925'248);
  EXPECT_EQ(Preset("llama-2-7b").ActiveParams(), Preset("llama-2-7b").TotalParams());
}

TEST(PlannerModel, UnknownPresetListsKnownOnes) {
  auto m = FindPreset("llama-9-1t");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("llama-2-70b"), std::string::npos) << m.status();
  EXPECT_NE(m.status().message().find("mixtral-8x7b"), std::string::npos);
}

TEST(PlannerModel, ParsesHuggingFaceConfigs) {
  // Llama-2-7b-hf config.json (the keys that matter).
  auto llama = ParseHfConfig(R"({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
      "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
      "vocab_size": 32000, "tie_word_embeddings": false, "max_position_embeddings": 4096})", "my-llama");
  ASSERT_TRUE(llama.ok()) << llama.status();
  EXPECT_EQ(llama->TotalParams(), 6'738'415'616);
  EXPECT_EQ(llama->name, "my-llama");
  // THUDM/chatglm3-6b config.json uses its own key names.
  auto glm = ParseHfConfig(R"({"model_type": "chatglm", "num_layers": 28, "hidden_size": 4096,
      "ffn_hidden_size": 13696, "kv_channels": 128, "num_attention_heads": 32, "multi_query_attention": true,
      "multi_query_group_num": 2, "padded_vocab_size": 65024, "add_qkv_bias": true, "seq_length": 8192})", "glm");
  ASSERT_TRUE(glm.ok()) << glm.status();
  EXPECT_EQ(glm->TotalParams(), 6'243'584'000);
  auto mixtral = ParseHfConfig(R"({"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
      "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 32000,
      "num_local_experts": 8, "num_experts_per_tok": 2})", "mx");
  ASSERT_TRUE(mixtral.ok()) << mixtral.status();
  EXPECT_EQ(mixtral->TotalParams(), 46'702'792'704);
}

TEST(PlannerModel, MalformedConfigsAreRefusedWithTheField) {
  EXPECT_EQ(ParseHfConfig("{not json", "x").status().message(), "config.json is not valid JSON");
  auto missing = ParseHfConfig(R"({"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
      "vocab_size": 100})", "x");
  EXPECT_NE(missing.status().message().find("intermediate_size"), std::string::npos) << missing.status();
  auto wrong_type = ParseHfConfig(R"({"num_hidden_layers": 2, "hidden_size": "big", "num_attention_heads": 4})", "x");
  EXPECT_NE(wrong_type.status().message().find("\"hidden_size\" must be an integer"), std::string::npos);
  auto zero = ParseHfConfig(R"({"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 0,
      "intermediate_size": 128, "vocab_size": 100})", "x");
  EXPECT_NE(zero.status().message().find("layers must be positive"), std::string::npos) << zero.status();
  auto heads = ParseHfConfig(R"({"hidden_size": 64, "num_attention_heads": 6, "num_key_value_heads": 4,
      "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 100})", "x");
  EXPECT_NE(heads.status().message().find("multiple of kv_heads"), std::string::npos) << heads.status();
}

// Model states per card with Adam in mixed precision: the ZeRO paper (Rajbhandari et al., SC'20,
// Figure 1) gives, for 7.5B parameters on 64 data-parallel GPUs: 120 GB without ZeRO, 31.4 GB with
// optimizer partitioning (stage 1), 16.6 GB adding gradients (2) and 1.9 GB adding parameters (3).
TEST(PlannerMemory, ZeroStagesMatchTheZeroPaper) {
  const ModelSpec m = Preset("llama-2-7b");
  const double params = static_cast<double>(m.TotalParams());
  const double published[] = {120, 31.4, 16.6, 1.9};
  for (int stage = 0; stage <= 3; ++stage) {
    Workload w;
    w.zero_stage = stage;
    const MemoryBreakdown mem = EstimateMemory(m, w, Layout{1, 1, 64});
    const double states = mem.weights + mem.gradients + mem.optimizer + mem.master;
    EXPECT_NEAR(states / params * 7.5, published[stage], 0.05) << "stage " << stage;
  }
}

// DeepSpeed's estimate_zero3_model_states_mem_needs documents 6.10 GB per GPU for T0_3B (2851M
// parameters, 32M in the largest layer) on 8 GPUs: 18 bytes per parameter / 8 + 4 bytes per
// largest-layer parameter. It counts 2 bytes more per parameter than the ZeRO paper (an fp32
// gradient partition); we follow the paper and stay within 12% of DeepSpeed's figure.
TEST(PlannerMemory, ZeroThreeCloseToDeepSpeedsEstimate) {
  ModelSpec m = Preset("llama-2-7b");
  Workload w;
  w.zero_stage = 3;
  const MemoryBreakdown mem = EstimateMemory(m, w, Layout{1, 1, 8});
  const double per_param = (mem.weights + mem.gradients + mem.optimizer + mem.master) / m.TotalParams();
  EXPECT_DOUBLE_EQ(per_param, 2.0);  // 16 bytes / 8 ranks
  const double ours_gib = (per_param * 2851e6 + 4 * 32e6) / kGiB;
  const double deepspeed_gib = 6.10;
  EXPECT_NEAR(ours_gib / deepspeed_gib, 1.0, 0.12) << ours_gib;
}

TEST(PlannerMemory, BytesPerParameterByPrecisionMode) {
  const ModelSpec m = Preset("llama-2-7b");
  auto states = [&](Workload w) {
    const MemoryBreakdown mem = EstimateMemory(m, w, Layout{});
    return (mem.weights + mem.gradients + mem.optimizer + mem.master) / m.TotalParams();
  };
  Workload w;
  EXPECT_DOUBLE_EQ(states(w), 16);  // bf16 + fp32 master + Adam (Transformer Math 101)
  w.precision = Precision::kFp32;
  EXPECT_DOUBLE_EQ(states(w), 16);  // fp32 weights + grads + two moments
  w.optimizer = Optimizer::kSgd;
  EXPECT_DOUBLE_EQ(states(w), 8);
  // torch.autocast: fp32 weights and grads, Adam, plus bf16 copies of every weight but the
  // input embedding (PRIOR-ART.md measured ~18 bytes per parameter).
  Workload autocast;
  autocast.mixed = MixedPrecision::kAutocast;
  const double embedding = static_cast<double>(m.vocab) * m.hidden;
  EXPECT_NEAR(states(autocast), 18 - 2 * embedding / m.TotalParams(), 1e-9);
}

// Korthikanti et al. 2022, eq. (1)-(3): per layer sbh(34 + 5as/h) bytes with 16-bit
// activations, dropout and no recomputation; sbh(10 + 24/t + 5as/(ht)) with tensor parallelism t,
// sbh(34/t + 5as/(ht)) adding sequence parallelism;
// 34sbh with selective recomputation; 2sbh with full recomputation. Their GeLU MLP has two
// s x 4h tensors, which a gated MLP of width 2h reproduces (four s x 2h tensors).
TEST(PlannerMemory, ActivationsReproduceKorthikanti) {
  ModelSpec m;
  m.name = "gpt-like";
  m.layers = 1, m.hidden = 1024, m.heads = 16, m.kv_heads = 16, m.head_dim = 64, m.intermediate = 2048, m.vocab = 1000;
  Workload w;
  w.seq = 2048, w.micro_batch = 2, w.dropout = true;
  w.attention = AttentionKernel::kEager, w.recompute = Recompute::kNone;
  const double s = 2048, b = 2, h = 1024, a = 16;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, w, Layout{}), s * b * h * (34 + 5 * a * s / h));
  for (int t : {2, 4, 8}) {
    w.sequence_parallel = false;
    EXPECT_DOUBLE_EQ(LayerActivationBytes(m, w, Layout{t, 1, 1}), s * b * h * (10 + 24.0 / t + 5 * a * s / (h * t)));
    w.sequence_parallel = true;  // eq. (3)
    EXPECT_DOUBLE_EQ(LayerActivationBytes(m, w, Layout{t, 1, 1}), s * b * h * (34.0 / t + 5 * a * s / (h * t)));
  }
  w.recompute = Recompute::kSelective;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, w, Layout{}), s * b * h * 34);
  w.recompute = Recompute::kFull;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, w, Layout{}), s * b * h * 2);
  // Without dropout the masks and the dropped-out probabilities go: 32sbh + 2as^2b.
  w.recompute = Recompute::kNone, w.dropout = false;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, w, Layout{}), s * b * h * 32 + 2 * a * s * s * b);
  // Flash attention keeps no s x s tensor, only a per-row log-sum-exp.
  w.attention = AttentionKernel::kFlash;
  EXPECT_DOUBLE_EQ(LayerActivationBytes(m, w, Layout{}), s * b * h * 32 + 4 * a * s * b);
}

// KV cache: 2 x layers x kv_heads x head_dim x bytes per token; Llama-2-70B (GQA, 8 KV heads)
// holds 320 KiB per token in bf16, the figure vLLM and NVIDIA's sizing guides quote.
TEST(PlannerMemory, KvCacheOfLlama2_70b) {
  Workload w;
  w.mode = Mode::kInfer, w.precision = Precision::kBf16, w.batch = 1, w.context = 4096;
  const MemoryBreakdown mem = EstimateMemory(Preset("llama-2-70b"), w, Layout{});
  EXPECT_DOUBLE_EQ(mem.kv_cache, 320.0 * 1024 * 4096);
  EXPECT_DOUBLE_EQ(mem.weights, 2.0 * 68'976'648'192);
  w.precision = Precision::kFp8, w.kv_precision = Precision::kFp8, w.batch = 32;
  const MemoryBreakdown fp8 = EstimateMemory(Preset("llama-2-70b"), w, Layout{4, 1, 1});
  EXPECT_DOUBLE_EQ(fp8.weights, 68'976'648'192 / 4.0 + 0);  // vocab rows split over 4 ranks too
  EXPECT_DOUBLE_EQ(fp8.kv_cache, 160.0 * 1024 * 4096 * 32 / 4);
}

TEST(PlannerMemory, LoraFreezesTheBase) {
  const ModelSpec m = Preset("llama-2-7b");
  Workload w;
  w.lora_rank = 16, w.precision = Precision::kInt4;  // QLoRA
  ASSERT_TRUE(Validate(w).ok());
  const MemoryBreakdown mem = EstimateMemory(m, w, Layout{});
  // Q and V adapters: 32 layers x 16 x (4096 + 4096) x 2 = 8.4M trainable parameters.
  EXPECT_EQ(TrainableParams(m, w), 32 * 16 * (4096 + 4096) * 2);
  EXPECT_DOUBLE_EQ(mem.gradients, 2.0 * TrainableParams(m, w));
  EXPECT_NEAR(mem.weights, m.TotalParams() * (0.5 + 2.0 / 128) + 2.0 * TrainableParams(m, w), 1);
  Workload full;
  full.precision = Precision::kInt4;
  EXPECT_NE(Validate(full).message().find("QLoRA"), std::string::npos);
}

// A node of `count` identical cards; `fabric` joins them all (NVSwitch-like) or in pairs.
enum class Fabric { kAll, kPairs, kNone };
NodeInventory Node(const std::string& model, uint64_t memory_mib, int count, Fabric fabric, Vendor vendor = Vendor::kNvidia) {
  static const drivers::SpecTable specs = drivers::SpecTable::Defaults();
  NodeInventory inv;
  for (int i = 0; i < count; ++i) {
    DeviceRecord d;
    d.id = "gpu" + std::to_string(i);
    d.index = i;
    d.vendor = vendor;
    d.model = model;
    d.memory_mib = memory_mib;
    for (int j = 0; j < count; ++j) {
      const bool joined = fabric == Fabric::kAll || (fabric == Fabric::kPairs && j / 2 == i / 2);
      if (j != i && joined) d.links.push_back({"gpu" + std::to_string(j), LinkKind::kNvLink, 1});
    }
    drivers::ApplyFingerprint(specs, d);
    inv.devices.push_back(d);
  }
  return inv;
}

std::vector<PoolClass> Pool(std::initializer_list<std::pair<std::string, NodeInventory>> nodes) {
  std::vector<PoolClass> classes;
  for (const auto& [name, inv] : nodes) AddNode(classes, name, inv, std::nullopt);
  return classes;
}

PlanRequest Train70b() {
  PlanRequest req;
  req.model = Preset("llama-2-70b");
  req.workload.seq = 4096;
  req.workload.tokens = 2e9;
  req.workload.zero_stage = 3;
  return req;
}

TEST(Planner, BuildsClassesWithLinkGroups) {
  auto classes = Pool({{"dgx-1", Node("NVIDIA H100 80GB HBM3", 81559, 8, Fabric::kAll)},
                       {"pcie-1", Node("NVIDIA A100 80GB PCIe", 81920, 8, Fabric::kPairs)}});
  ASSERT_EQ(classes.size(), 2u);
  EXPECT_EQ(classes[0].LargestLinkGroup(), 8);
  EXPECT_EQ(classes[1].LargestLinkGroup(), 2);
  EXPECT_EQ(classes[1].Total(), 8);
}

TEST(Planner, SeventyBillionTrainTakesWholeNodesWithTensorParallelInTheGroup) {
  auto classes = Pool({{"dgx-1", Node("NVIDIA H100 80GB HBM3", 81559, 8, Fabric::kAll)},
                       {"dgx-2", Node("NVIDIA H100 80GB HBM3", 81559, 8, Fabric::kAll)},
                       {"dgx-3", Node("NVIDIA H100 80GB HBM3", 81559, 8, Fabric::kAll)},
                       {"dgx-4", Node("NVIDIA H100 80GB HBM3", 81559, 8, Fabric::kAll)}});
  auto result = MakePlan(Train70b(), classes, PriceTable{});
  ASSERT_TRUE(result.ok()) << result.status();
  const Plan& p = result->plans.at(0);
  ASSERT_TRUE(p.feasible) << p.reason;
  // 16 bytes x 69B = 1.1 TB of model state does not fit 8 x 80 GB; two whole nodes hold it with
  // tensor parallelism over each node's NVSwitch group and two pipeline stages.
  EXPECT_EQ(p.layout.Devices(), 16);
  EXPECT_EQ(p.nodes, 2);
  EXPECT_EQ(p.devices_per_node, 8);
  EXPECT_EQ(p.layout.tp, 8);
  EXPECT_LE(p.required_bytes, p.card_bytes);
  // Time: (6N + attention) FLOPs per token at 989 TFLOPS x 40% MFU on every card, stretched by the
  // pipeline bubble: with one micro-batch per step, (1 + pp - 1) / 1.
  const double flops = result->flops_per_token * 2e9;
  const double ideal = flops / (16 * 989e12 * 0.40) * p.layout.pp;
  EXPECT_NEAR(p.total_seconds / ideal, 1.0, 1e-9);
  // With eight micro-batches per step the bubble shrinks to (8 + pp - 1) / 8.
  PlanRequest accumulate = Train70b();
  accumulate.workload.grad_accum = 8;
  auto smoother = MakePlan(accumulate, classes, PriceTable{});
  ASSERT_TRUE(smoother.ok() && smoother->plans[0].feasible);
  const Layout l = smoother->plans[0].layout;
  EXPECT_NEAR(smoother->plans[0].total_seconds, flops / (l.Devices() * 989e12 * 0.40) * (8.0 + l.pp - 1) / 8, 1e-6);
}

TEST(Planner, OneNodeIsNotEnoughAndTheSummarySaysHowClose) {
  auto classes = Pool({{"dgx-1", Node("NVIDIA H100 80GB HBM3", 81559, 8, Fabric::kAll)}});
  auto result = MakePlan(Train70b(), classes, PriceTable{});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->plans.at(0).feasible);
  EXPECT_NE(result->plans.at(0).reason.find("per card at best"), std::string::npos) << result->plans[0].reason;
  // 16 x 68.98e9 = 1.00 TiB of model state; 8 x 79.6 GiB = 637 GiB in the NVSwitch group.
  EXPECT_NE(result->infeasible_summary.find("needs 1.00 TiB of model state"), std::string::npos)
      << result->infeasible_summary;
  EXPECT_NE(result->infeasible_summary.find("largest link group holds 637.2 GiB (8 x"), std::string::npos)
      << result->infeasible_summary;
}

TEST(Planner, TensorParallelStaysInsideBridgedPairs) {
  auto classes = Pool({{"pcie-1", Node("NVIDIA A100 80GB PCIe", 81920, 8, Fabric::kPairs)}});
  PlanRequest req;
  req.model = Preset("llama-2-70b");
  req.workload.mode = Mode::kInfer, req.workload.batch = 8, req.workload.context = 4096;
  auto result = MakePlan(req, classes, PriceTable{});
  ASSERT_TRUE(result.ok()) << result.status();
  const Plan& p = result->plans.at(0);
  ASSERT_TRUE(p.feasible) << p.reason;
  EXPECT_LE(p.layout.tp, 2);
  EXPECT_GE(p.layout.Devices(), 2);  // 138 GB of bf16 weights
  EXPECT_EQ(p.layout.dp, 1);
}

TEST(Planner, ObjectivesRankDifferentlyAndCostPerformanceFollowsTheDefinition) {
  auto classes = Pool({{"h100", Node("NVIDIA H100 80GB HBM3", 81559, 8, Fabric::kAll)},
                       {"a100", Node("NVIDIA A100-SXM4-80GB", 81920, 8, Fabric::kAll)}});
  auto prices = ParsePriceTable(R"({"currency": "CNY", "baseline": "A100",
      "classes": [{"match": "H100", "price_per_card_hour": 40}, {"match": "A100", "price_per_card_hour": 10}]})");
  ASSERT_TRUE(prices.ok()) << prices.status();
  PlanRequest req;
  req.model = Preset("llama-2-7b");
  req.workload.tokens = 1e9, req.workload.zero_stage = 1;
  req.objective = Objective::kCost;
  auto by_cost = MakePlan(req, classes, *prices);
  ASSERT_TRUE(by_cost.ok()) << by_cost.status();
  ASSERT_TRUE(by_cost->plans[0].feasible && by_cost->plans[1].feasible);
  // A100: 312 TFLOPS at 10/h; H100: 989 at 40/h -> the A100 is cheaper, the H100 faster.
  EXPECT_NE(by_cost->plans[0].label.find("A100"), std::string::npos);
  EXPECT_LT(by_cost->plans[0].cost, by_cost->plans[1].cost);
  req.objective = Objective::kTime;
  auto by_time = MakePlan(req, classes, *prices);
  ASSERT_TRUE(by_time.ok());
  EXPECT_NE(by_time->plans[0].label.find("H100"), std::string::npos);
  EXPECT_NE(by_time->baseline.find("A100"), std::string::npos);
  const Plan& h100 = by_time->plans[0];
  const Plan& a100 = by_time->plans[1];
  EXPECT_DOUBLE_EQ(a100.cost_performance, 1.0);
  const double per_token_h = h100.step_seconds / (h100.layout.dp * 4096.0);
  const double per_token_a = a100.step_seconds / (a100.layout.dp * 4096.0);
  EXPECT_NEAR(h100.cost_performance, (per_token_a / per_token_h) * (10.0 / 40.0), 1e-9);
}

TEST(Planner, NowPrefersWhatIsFree) {
  std::vector<PoolClass> classes;
  AddNode(classes, "h100", Node("NVIDIA H100 80GB HBM3", 81559, 8, Fabric::kAll), std::set<std::string>{});
  AddNode(classes, "a100", Node("NVIDIA A100-SXM4-80GB", 81920, 8, Fabric::kAll), std::nullopt);
  PlanRequest req;
  req.model = Preset("llama-2-7b");
  req.objective = Objective::kNow;
  auto result = MakePlan(req, classes, PriceTable{});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->plans[0].available_now);
  EXPECT_NE(result->plans[0].label.find("A100"), std::string::npos);
  EXPECT_FALSE(result->plans[1].available_now);
  req.objective = Objective::kTime;
  EXPECT_NE(MakePlan(req, classes, PriceTable{})->plans[0].label.find("H100"), std::string::npos);
}

TEST(Planner, RefusesWhatNoCardSupportsAndBadSizes) {
  auto classes = Pool({{"a100", Node("NVIDIA A100-SXM4-80GB", 81920, 8, Fabric::kAll)}});
  PlanRequest req;
  req.model = Preset("llama-2-7b");
  req.workload.precision = Precision::kFp8;
  auto fp8 = MakePlan(req, classes, PriceTable{});
  ASSERT_FALSE(fp8.ok());
  EXPECT_NE(fp8.status().message().find("no card in the pool supports fp8"), std::string::npos) << fp8.status();
  req.workload.precision = Precision::kBf16;
  req.workload.seq = 0;
  auto zero = MakePlan(req, classes, PriceTable{});
  EXPECT_EQ(zero.status().message(), "seq must be positive (got 0)");
  req.workload.seq = 4096;
  EXPECT_FALSE(MakePlan(req, {}, PriceTable{}).ok());
  EXPECT_FALSE(ParsePriceTable(R"({"classes": [{"match": "H100", "price_per_card_hour": -1}]})").ok());
  EXPECT_FALSE(ParsePriceTable(R"({"classes": [{"price_per_card_hour": 3}]})").ok());
}

}  // namespace
}  // namespace hetpool::planner
