#include "src/common/plan_convert.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "drivers/fingerprint/spec_table.h"
#include "planner/planner.h"
#include "src/common/flags.h"

namespace hetpool {
namespace {

using planner::Workload;

absl::StatusOr<planner::ModelSpec> ResolveModel(const pb::ModelRef& ref) {
  const bool has_dims = ref.dims().layers() != 0 || ref.dims().hidden() != 0 || ref.dims().heads() != 0;
  const int given = (ref.preset().empty() ? 0 : 1) + (ref.config_json().empty() ? 0 : 1) + (has_dims ? 1 : 0);
  if (given == 0) {
    return absl::InvalidArgumentError("model: give a preset name, a config.json or explicit dimensions");
  }
  if (given > 1) return absl::InvalidArgumentError("model: give only one of preset, config.json, dimensions");
  if (!ref.preset().empty()) return planner::FindPreset(ref.preset());
  const std::string name = ref.name().empty() ? "custom" : ref.name();
  if (!ref.config_json().empty()) return planner::ParseHfConfig(ref.config_json(), name);
  const pb::ModelDimensions& d = ref.dims();
  planner::ModelSpec m;
  m.name = name;
  m.layers = d.layers(), m.hidden = d.hidden(), m.heads = d.heads();
  m.kv_heads = d.kv_heads() != 0 ? d.kv_heads() : d.heads();
  m.head_dim = d.head_dim() != 0 ? d.head_dim() : (d.heads() > 0 ? d.hidden() / d.heads() : 0);
  m.intermediate = d.intermediate(), m.vocab = d.vocab();
  m.tied_embeddings = d.tied_embeddings(), m.qkv_bias = d.qkv_bias();
  m.experts = d.experts(), m.experts_per_token = d.experts_per_token();
  if (absl::Status s = planner::Validate(m); !s.ok()) return s;
  return m;
}

// A named choice: the text (case-insensitive), or the default when empty.
template <typename T>
absl::StatusOr<T> Choice(const std::string& field, const std::string& text, T fallback,
                         std::initializer_list<std::pair<const char*, T>> options) {
  if (text.empty()) return fallback;
  const std::string lower = absl::AsciiStrToLower(text);
  std::string names;
  for (const auto& [name, value] : options) {
    if (lower == name) return value;
    absl::StrAppend(&names, names.empty() ? "" : ", ", name);
  }
  return absl::InvalidArgumentError(absl::StrCat(field, ": unknown value '", text, "' (", names, ")"));
}

absl::StatusOr<Workload> ResolveWorkload(const pb::Workload& in) {
  Workload w;
  auto mode = Choice<planner::Mode>("mode", in.mode(), planner::Mode::kTrain,
                                    {{"train", planner::Mode::kTrain},
                                     {"infer", planner::Mode::kInfer},
                                     {"inference", planner::Mode::kInfer},
                                     {"serve", planner::Mode::kInfer}});
  if (!mode.ok()) return mode.status();
  w.mode = *mode;
  if (!in.precision().empty()) {
    auto p = drivers::ParsePrecision(in.precision());
    if (!p.ok()) return absl::InvalidArgumentError(absl::StrCat("precision: ", p.status().message()));
    w.precision = *p;
  }
  auto optimizer = Choice<planner::Optimizer>("optimizer", in.optimizer(), planner::Optimizer::kAdamW,
                                              {{"adamw", planner::Optimizer::kAdamW},
                                               {"adam", planner::Optimizer::kAdamW},
                                               {"sgd-momentum", planner::Optimizer::kSgdMomentum},
                                               {"sgd", planner::Optimizer::kSgd}});
  if (!optimizer.ok()) return optimizer.status();
  w.optimizer = *optimizer;
  auto mixed = Choice<planner::MixedPrecision>(
      "mixed_precision", in.mixed_precision(), planner::MixedPrecision::kMasterWeights,
      {{"master", planner::MixedPrecision::kMasterWeights}, {"autocast", planner::MixedPrecision::kAutocast}});
  if (!mixed.ok()) return mixed.status();
  w.mixed = *mixed;
  auto recompute = Choice<planner::Recompute>("recompute", in.recompute(), planner::Recompute::kSelective,
                                              {{"none", planner::Recompute::kNone},
                                               {"selective", planner::Recompute::kSelective},
                                               {"full", planner::Recompute::kFull}});
  if (!recompute.ok()) return recompute.status();
  w.recompute = *recompute;
  auto attention = Choice<planner::AttentionKernel>(
      "attention", in.attention(), planner::AttentionKernel::kFlash,
      {{"flash", planner::AttentionKernel::kFlash}, {"eager", planner::AttentionKernel::kEager}});
  if (!attention.ok()) return attention.status();
  w.attention = *attention;
  if (in.has_zero_stage()) w.zero_stage = in.zero_stage();
  if (in.has_micro_batch()) w.micro_batch = in.micro_batch();
  if (in.has_seq()) w.seq = in.seq();
  if (in.has_grad_accum()) w.grad_accum = in.grad_accum();
  w.dropout = in.dropout();
  w.sequence_parallel = !in.no_sequence_parallel();
  if (in.has_lora_rank()) w.lora_rank = in.lora_rank();
  w.lora_all_linear = in.lora_all_linear();
  if (in.has_batch()) w.batch = in.batch();
  if (in.has_context()) w.context = in.context();
  if (in.has_prompt()) w.prompt = in.prompt();
  if (in.has_prefill_chunk()) w.prefill_chunk = in.prefill_chunk();
  if (in.has_prompt() && in.prompt() <= 0) return absl::InvalidArgumentError("prompt must be positive");
  // The cache is kept in the serving precision, but never below 8 bits (int4 weights keep a
  // 16-bit cache unless told otherwise).
  w.kv_precision = w.precision == Precision::kInt4 || w.precision == Precision::kInt8 ? Precision::kBf16 : w.precision;
  if (!in.kv_precision().empty()) {
    auto p = drivers::ParsePrecision(in.kv_precision());
    if (!p.ok()) return absl::InvalidArgumentError(absl::StrCat("kv_precision: ", p.status().message()));
    w.kv_precision = *p;
  }
  if (in.has_tokens()) w.tokens = in.tokens();
  if (absl::Status s = planner::Validate(w); !s.ok()) return s;
  return w;
}

pb::MemoryBreakdown ToProto(const planner::MemoryBreakdown& m) {
  pb::MemoryBreakdown out;
  out.set_weights(m.weights);
  out.set_gradients(m.gradients);
  out.set_optimizer(m.optimizer);
  out.set_master(m.master);
  out.set_activations(m.activations);
  out.set_kv_cache(m.kv_cache);
  out.set_transient(m.transient);
  out.set_total(m.Total());
  out.set_allocator(m.allocator);
  return out;
}

}  // namespace

absl::StatusOr<planner::PlanRequest> FromProto(const pb::PlanRequest& request) {
  planner::PlanRequest out;
  auto model = ResolveModel(request.model());
  if (!model.ok()) return model.status();
  out.model = *std::move(model);
  auto workload = ResolveWorkload(request.workload());
  if (!workload.ok()) return workload.status();
  out.workload = *workload;
  const pb::Workload& asked = request.workload();
  if (asked.has_global_batch_tokens() && asked.has_grad_accum()) {
    return absl::InvalidArgumentError("global_batch_tokens and grad_accum: give one (the planner chooses the other)");
  }
  if (out.workload.mode == planner::Mode::kTrain && !asked.has_grad_accum()) {
    out.workload.global_batch_tokens =
        asked.has_global_batch_tokens() ? asked.global_batch_tokens() : planner::DefaultGlobalBatchTokens(out.model);
  }
  auto objective = planner::ParseObjective(request.objective());
  if (!objective.ok()) return objective.status();
  out.objective = *objective;
  out.cards = request.cards();
  if (request.has_layout()) {
    out.layout = planner::Layout{request.layout().tp(), request.layout().pp(), request.layout().dp()};
  }
  return out;
}

pb::PlanRow ToProto(const planner::Plan& p, const Workload& w) {
  pb::PlanRow row;
  row.set_fingerprint(p.fingerprint);
  row.set_label(p.label);
  row.set_feasible(p.feasible);
  row.set_reason(p.reason);
  row.set_class_total(p.class_total);
  row.set_class_free(p.class_free);
  row.set_card_bytes(p.card_bytes);
  row.set_price_per_card_hour(p.price_per_card_hour);
  if (!p.feasible) return row;
  row.set_tp(p.layout.tp);
  row.set_pp(p.layout.pp);
  row.set_dp(p.layout.dp);
  row.set_zero_stage(p.zero_stage);
  row.set_nodes(p.nodes);
  row.set_devices_per_node(p.devices_per_node);
  *row.mutable_memory() = ToProto(p.memory);
  row.set_required_bytes(p.required_bytes);
  row.set_step_seconds(p.step_seconds);
  row.set_comm_seconds(p.comm_seconds);
  row.set_total_seconds(p.total_seconds);
  row.set_cost(p.cost);
  row.set_cost_performance(p.cost_performance);
  row.set_available_now(p.available_now);
  row.set_micro_batch(w.mode == planner::Mode::kTrain ? w.micro_batch : w.batch);
  row.set_grad_accum(w.mode == planner::Mode::kTrain ? planner::GradAccumFor(w, p.layout) : 1);
  return row;
}

pb::PlanResponse ToProto(const planner::PlanResult& result, const planner::PlanRequest& request,
                         const planner::PriceTable& prices) {
  pb::PlanResponse out;
  for (const planner::Plan& p : result.plans) *out.add_plans() = ToProto(p, request.workload);
  out.set_currency(result.currency);
  out.set_baseline(result.baseline);
  out.set_total_params(result.total_params);
  out.set_active_params(result.active_params);
  out.set_trainable_params(result.trainable_params);
  out.set_flops_per_token(result.flops_per_token);
  out.set_infeasible_summary(result.infeasible_summary);
  out.set_ranked_by(result.ranked_by);
  out.set_family(result.family);
  out.set_model_name(request.model.name);
  out.set_objective(std::string(planner::ObjectiveName(request.objective)));
  out.set_mode(request.workload.mode == planner::Mode::kTrain ? "train" : "infer");
  out.set_precision(std::string(drivers::PrecisionName(request.workload.precision)));
  out.set_memory_margin(prices.memory_margin);
  if (request.workload.mode == planner::Mode::kTrain) out.set_global_batch_tokens(request.workload.global_batch_tokens);
  return out;
}

absl::StatusOr<pb::PlanResponse> AnswerPlan(const pb::PlanRequest& request,
                                            const std::vector<planner::PoolClass>& classes,
                                            const planner::PriceTable& prices) {
  auto req = FromProto(request);
  if (!req.ok()) return req.status();
  if (!request.mixed()) {
    auto result = planner::MakePlan(*req, classes, prices);
    if (!result.ok()) return result.status();
    return ToProto(*result, *req, prices);
  }
  auto mixed = planner::MakeMixedPlan(*req, classes, prices);
  if (!mixed.ok()) return mixed.status();
  // The frame of an ordinary answer (model, workload, currency), each class alone as its rows.
  planner::PlanResult frame;
  frame.currency = prices.currency;
  frame.total_params = req->model.TotalParams();
  frame.active_params = req->model.ActiveParams();
  frame.trainable_params = planner::TrainableParams(req->model, req->workload);
  frame.family = req->model.family;
  frame.flops_per_token = planner::ModelFlopsPerToken(req->model, req->workload);
  frame.plans = mixed->alone;
  frame.ranked_by = "time per token, each class alone on its free cards";
  pb::PlanResponse out = ToProto(frame, *req, prices);
  pb::MixedPlanResult& m = *out.mutable_mixed();
  m.set_kind(planner::MixedKindName(mixed->kind));
  for (const planner::MixedGroup& g : mixed->groups) {
    auto* group = m.add_groups();
    group->set_label(g.label);
    group->set_fingerprint(g.fingerprint);
    group->set_cards(g.cards);
    group->set_tp(g.layout.tp);
    group->set_pp(g.layout.pp);
    group->set_dp(g.layout.dp);
    for (int layers : g.stage_layers) group->add_stage_layers(layers);
    group->set_layers(g.layers);
    group->set_required_bytes(g.required_bytes);
    group->set_card_bytes(g.card_bytes);
    group->set_tokens_per_second(g.tokens_per_second);
    group->set_share(g.share);
  }
  for (const std::string& why : mixed->left_out) m.add_left_out(why);
  for (const std::string& note : mixed->notes) m.add_notes(note);
  m.set_tokens_per_step(mixed->tokens_per_step);
  m.set_compute_seconds(mixed->compute_seconds);
  m.set_link_seconds(mixed->link_seconds);
  m.set_link_gbytes_per_s(mixed->link_gbytes_per_s);
  m.set_tokens_per_second(mixed->tokens_per_second);
  m.set_cards(mixed->cards);
  if (mixed->same_cards) *m.mutable_same_cards() = ToProto(*mixed->same_cards, req->workload);
  m.set_same_cards_tokens_per_second(mixed->same_cards_tokens_per_second);
  m.set_fastest_alone_tokens_per_second(mixed->fastest_alone_tokens_per_second);
  return out;
}

absl::StatusOr<pb::PlanLayout> ParseLayout(absl::string_view text) {
  pb::PlanLayout layout;
  layout.set_tp(1), layout.set_pp(1), layout.set_dp(1);
  bool any = false;
  for (absl::string_view word : absl::StrSplit(text, absl::ByAnyChar(", "), absl::SkipEmpty())) {
    const std::string lower = absl::AsciiStrToLower(word);
    if (lower.starts_with("zero")) continue;  // "ZeRO-3" as plans print it: the stage is --zero's
    int degree = 0;
    const std::string kind = lower.substr(0, 2);
    if (lower.size() < 3 || !absl::SimpleAtoi(lower.substr(2), &degree) || degree < 1 || degree > 1 << 20 ||
        (kind != "tp" && kind != "pp" && kind != "dp")) {
      return absl::InvalidArgumentError(absl::StrCat("layout: '", word, "' is not tpN, ppN or dpN (e.g. tp8,pp2,dp4)"));
    }
    (kind == "tp" ? layout.set_tp(degree) : kind == "pp" ? layout.set_pp(degree) : layout.set_dp(degree));
    any = true;
  }
  if (!any) return absl::InvalidArgumentError("layout: empty (e.g. tp8,pp2,dp4)");
  return layout;
}

std::string LayoutName(const pb::PlanRow& plan) {
  return planner::LayoutName(planner::Layout{plan.tp(), plan.pp(), plan.dp()}, plan.zero_stage());
}

absl::StatusOr<planner::PriceTable> ReadPriceTableFile(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  auto prices = planner::ParsePriceTable(*text);
  if (!prices.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", prices.status().message()));
  return prices;
}

std::vector<std::pair<std::string, std::string>> PlanEnvironment(const pb::PlanRow& plan) {
  return {{"HETPOOL_TP", absl::StrCat(plan.tp())},
          {"HETPOOL_PP", absl::StrCat(plan.pp())},
          {"HETPOOL_DP", absl::StrCat(plan.dp())},
          {"HETPOOL_ZERO_STAGE", absl::StrCat(plan.zero_stage())},
          {"HETPOOL_MICRO_BATCH", absl::StrCat(plan.micro_batch())},
          {"HETPOOL_GRAD_ACCUM", absl::StrCat(plan.grad_accum())},
          {"HETPOOL_PLAN_CLASS", plan.fingerprint()}};
}

}  // namespace hetpool
