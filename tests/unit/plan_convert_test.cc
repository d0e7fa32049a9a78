// PlanRequest messages -> planner inputs: defaults, the three ways to name a model, and errors
// that name the field.
#include <gtest/gtest.h>

#include "src/common/plan_convert.h"

namespace hetpool {
namespace {

TEST(PlanConvert, DefaultsApplyToUnsetFields) {
  pb::PlanRequest req;
  req.mutable_model()->set_preset("llama-3-8b");
  auto out = FromProto(req);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->model.name, "llama-3-8b");
  EXPECT_EQ(out->workload.mode, planner::Mode::kTrain);
  EXPECT_EQ(out->workload.precision, Precision::kBf16);
  EXPECT_EQ(out->workload.seq, 4096);
  EXPECT_EQ(out->workload.micro_batch, 1);
  EXPECT_EQ(out->objective, planner::Objective::kCost);
}

// Issue 43, item 2: training without grad_accum gets a global batch, by model size unless given.
TEST(PlanConvert, TrainingChoosesItsMicroBatchesWithinAGlobalBatch) {
  struct Case {
    const char* preset;
    int64_t tokens;
  };
  for (const Case& c : {Case{"gpt2", 1 << 19}, Case{"gpt2-xl", 1 << 20}, Case{"llama-2-7b", 1 << 22}}) {
    pb::PlanRequest req;
    req.mutable_model()->set_preset(c.preset);
    auto out = FromProto(req);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->workload.global_batch_tokens, c.tokens) << c.preset;
  }
  pb::PlanRequest given;
  given.mutable_model()->set_preset("llama-2-7b");
  given.mutable_workload()->set_global_batch_tokens(1 << 21);
  EXPECT_EQ(FromProto(given)->workload.global_batch_tokens, 1 << 21);
  given.mutable_workload()->set_grad_accum(8);
  EXPECT_EQ(FromProto(given).status().message(),
            "global_batch_tokens and grad_accum: give one (the planner chooses the other)");
  given.mutable_workload()->clear_global_batch_tokens();
  EXPECT_EQ(FromProto(given)->workload.global_batch_tokens, 0);  // grad_accum as given
  EXPECT_EQ(FromProto(given)->workload.grad_accum, 8);
  pb::PlanRequest serving;
  serving.mutable_model()->set_preset("llama-2-7b");
  serving.mutable_workload()->set_mode("infer");
  EXPECT_EQ(FromProto(serving)->workload.global_batch_tokens, 0);
}

TEST(PlanConvert, ExplicitDimensionsAndInferenceFields) {
  pb::PlanRequest req;
  pb::ModelDimensions& d = *req.mutable_model()->mutable_dims();
  d.set_layers(2), d.set_hidden(64), d.set_heads(4), d.set_intermediate(128), d.set_vocab(1000);
  req.mutable_model()->set_name("tiny");
  req.mutable_workload()->set_mode("infer");
  req.mutable_workload()->set_precision("int4");
  req.mutable_workload()->set_batch(16);
  req.set_objective("now");
  auto out = FromProto(req);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->model.kv_heads, 4);
  EXPECT_EQ(out->model.head_dim, 16);
  EXPECT_EQ(out->model.TotalParams(), 2 * (4 * 64 * 64 + 3 * 64 * 128 + 2 * 64) + 2 * 1000 * 64 + 64);
  EXPECT_EQ(out->workload.batch, 16);
  EXPECT_EQ(out->workload.kv_precision, Precision::kBf16);  // int4 weights keep a 16-bit cache
  EXPECT_EQ(out->objective, planner::Objective::kNow);
}

TEST(PlanConvert, ErrorsNameTheField) {
  auto message = [](const pb::PlanRequest& req) { return std::string(FromProto(req).status().message()); };
  pb::PlanRequest none;
  EXPECT_EQ(message(none), "model: give a preset name, a config.json or explicit dimensions");
  pb::PlanRequest two;
  two.mutable_model()->set_preset("llama-2-7b");
  two.mutable_model()->set_config_json("{}");
  EXPECT_EQ(message(two), "model: give only one of preset, config.json, dimensions");
  pb::PlanRequest bad;
  bad.mutable_model()->set_preset("llama-2-7b");
  bad.mutable_workload()->set_mode("trian");
  EXPECT_EQ(message(bad), "mode: unknown value 'trian' (train, infer, inference, serve)");
  bad.mutable_workload()->set_mode("train");
  bad.mutable_workload()->set_precision("fp12");
  EXPECT_NE(message(bad).find("precision: unknown precision 'fp12'"), std::string::npos);
  bad.mutable_workload()->set_precision("bf16");
  bad.mutable_workload()->set_micro_batch(-1);
  EXPECT_EQ(message(bad), "micro_batch must be positive (got -1)");
  bad.mutable_workload()->set_micro_batch(1);
  bad.mutable_workload()->set_zero_stage(4);
  EXPECT_EQ(message(bad), "zero stage must be 0..3 (got 4)");
  bad.mutable_workload()->set_zero_stage(1);
  bad.set_objective("cheapest");
  EXPECT_EQ(message(bad), "unknown objective 'cheapest' (cost, time, now)");
  pb::PlanRequest dims;
  dims.mutable_model()->mutable_dims()->set_layers(2);
  EXPECT_NE(message(dims).find("hidden must be positive"), std::string::npos) << message(dims);
}

TEST(PlanConvert, ParsesALayoutAsWrittenOrAsPrinted) {
  auto written = ParseLayout("tp8,pp2,dp4");
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(written->tp(), 8);
  EXPECT_EQ(written->pp(), 2);
  EXPECT_EQ(written->dp(), 4);
  auto printed = ParseLayout("TP2 DP8 ZeRO-3");  // as a plan prints it; the stage is --zero's
  ASSERT_TRUE(printed.ok()) << printed.status();
  EXPECT_EQ(printed->tp(), 2);
  EXPECT_EQ(printed->pp(), 1);
  EXPECT_EQ(printed->dp(), 8);
  EXPECT_EQ(ParseLayout("tp8,xx2").status().message(), "layout: 'xx2' is not tpN, ppN or dpN (e.g. tp8,pp2,dp4)");
  EXPECT_FALSE(ParseLayout("tp0").ok());
  EXPECT_FALSE(ParseLayout("tp").ok());
  EXPECT_EQ(ParseLayout(" , ").status().message(), "layout: empty (e.g. tp8,pp2,dp4)");
  // Through the request: a layout and a card count together are refused.
  pb::PlanRequest both;
  both.mutable_model()->set_preset("llama-2-7b");
  *both.mutable_layout() = *written;
  both.set_cards(8);
  auto request = FromProto(both);
  ASSERT_TRUE(request.ok()) << request.status();
  ASSERT_TRUE(request->layout.has_value());
  EXPECT_EQ(request->layout->Devices(), 64);
  auto plan = planner::MakePlan(*request, {}, planner::PriceTable{});
  EXPECT_EQ(plan.status().message(), "give a layout or a card count, not both");
}

TEST(PlanConvert, LayoutEnvironment) {
  pb::PlanRow row;
  row.set_tp(4), row.set_pp(2), row.set_dp(3), row.set_zero_stage(1), row.set_micro_batch(2), row.set_grad_accum(8);
  row.set_fingerprint("fp-abc");
  const auto env = PlanEnvironment(row);
  const std::vector<std::pair<std::string, std::string>> expected = {{"HETPOOL_TP", "4"},
                                                                     {"HETPOOL_PP", "2"},
                                                                     {"HETPOOL_DP", "3"},
                                                                     {"HETPOOL_ZERO_STAGE", "1"},
                                                                     {"HETPOOL_MICRO_BATCH", "2"},
                                                                     {"HETPOOL_GRAD_ACCUM", "8"},
                                                                     {"HETPOOL_PLAN_CLASS", "fp-abc"}};
  EXPECT_EQ(env, expected);
}

}  // namespace
}  // namespace hetpool
