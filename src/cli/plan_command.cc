// `hetpoolctl plan`: ranked ways to train or serve a model on the pool's cards, from hetpoold's
// PlannerService or offline against inventory files (--pool) with no daemon running.
#include "src/cli/command.h"

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "drivers/fingerprint/fingerprint.h"
#include "drivers/inventory_json.h"
#include "planner/planner.h"
#include "src/cli/output.h"
#include "src/common/plan_convert.h"

namespace hetpool::cli {
namespace {

std::string Duration(double seconds) {
  if (seconds <= 0) return "?";
  if (seconds < 120) return absl::StrFormat("%.3g s", seconds);
  if (seconds < 2 * 3600) return absl::StrFormat("%.1f min", seconds / 60);
  if (seconds < 2 * 86400) return absl::StrFormat("%.1f h", seconds / 3600);
  return absl::StrFormat("%.1f d", seconds / 86400);
}

std::string Params(int64_t n) { return absl::StrFormat("%.2fB", static_cast<double>(n) / 1e9); }

std::string Money(double amount, const std::string& currency) {
  return amount > 0 ? absl::StrFormat("%s %.2f", currency, amount) : "-";
}

// The default output fits kNarrowWidth columns: the widest columns go first, and each class's
// note is printed under the table, wrapped. `wide`: every column, the notes in the table.
constexpr size_t kNarrowWidth = 100;

void PrintPlans(const pb::PlanResponse& resp, bool wide) {
  std::string heading =
      absl::StrCat(resp.model_name(), resp.family().empty() ? "" : absl::StrCat(" (", resp.family(), ")"), ": ",
                   Params(resp.total_params()), " parameters");
  if (resp.active_params() != resp.total_params())
    absl::StrAppend(&heading, " (", Params(resp.active_params()), " active)");
  if (resp.trainable_params() > 0 && resp.trainable_params() != resp.total_params()) {
    absl::StrAppend(&heading, ", ", absl::StrFormat("%.1fM", resp.trainable_params() / 1e6), " trainable");
  }
  absl::StrAppend(&heading, "; ", resp.mode(), " ", resp.precision(), "; ranked by ",
                  resp.ranked_by().empty() ? resp.objective() : resp.ranked_by(), "; memory = estimate + ",
                  absl::StrFormat("%.0f%%", resp.memory_margin() * 100),
                  " margin + allocator slack (training) + runtime reserve");
  std::cout << (wide ? heading + "\n" : Wrap(heading, kNarrowWidth, 2));
  std::vector<std::string> header = {"#",        "CLASS", "FINGERPRINT", "CARDS", "LAYOUT",    "NODES", "MEM/CARD",
                                     "HEADROOM", "STEP",  "TIME",        "COST",  "COST-PERF", "NOW"};
  if (wide) header.push_back("NOTE");
  Table table(header);
  if (!wide) table.Droppable({"FINGERPRINT", "HEADROOM", "COST-PERF", "NODES", "STEP"});
  std::vector<std::string> notes;
  bool time_unknown = false;
  int rank = 0;
  for (const pb::PlanRow& p : resp.plans()) {
    std::vector<std::string> row;
    std::string number = "-";
    if (!p.feasible()) {
      row = {"-",
             p.label(),
             p.fingerprint(),
             "-",
             "-",
             "-",
             "-",
             "-",
             "-",
             "-",
             "-",
             "-",
             absl::StrCat(p.class_free(), "/", p.class_total())};
    } else {
      number = absl::StrCat(++rank);
      const double headroom = p.card_bytes() - p.required_bytes();
      time_unknown = time_unknown || p.total_seconds() <= 0;
      row = {number,
             p.label(),
             p.fingerprint(),
             absl::StrCat(p.tp() * p.pp() * p.dp()),
             LayoutName(p),
             absl::StrCat(p.nodes(), "x", p.devices_per_node()),
             planner::HumanBytes(p.required_bytes()),
             absl::StrFormat("%s (%.0f%%)", planner::HumanBytes(headroom), 100 * headroom / p.card_bytes()),
             Duration(p.step_seconds()),
             Duration(p.total_seconds()),
             Money(p.cost(), resp.currency()),
             p.cost_performance() > 0 ? absl::StrFormat("%.2f", p.cost_performance()) : "-",
             absl::StrCat(p.available_now() ? "yes " : "no ", p.class_free(), "/", p.class_total())};
    }
    if (wide) {
      row.push_back(p.reason());
    } else if (!p.reason().empty()) {
      notes.push_back(Wrap(absl::StrCat(number, " ", p.label(), ": ", p.reason()), kNarrowWidth, 4));
    }
    table.Add(std::move(row));
  }
  std::cout << table.Render(wide ? 0 : kNarrowWidth);
  for (const std::string& note : notes) std::cout << note;
  if (resp.global_batch_tokens() > 0 && rank > 0) {
    const pb::PlanRow& first = resp.plans(0);
    const std::string chosen =
        absl::StrCat("micro-batches per step: chosen per layout within a global batch of ", resp.global_batch_tokens(),
                     " tokens (--global-batch; --grad-accum fixes them); #1 runs ", first.grad_accum(), " a step, ",
                     static_cast<int64_t>(first.micro_batch()) * first.grad_accum() * first.dp(), " sequences");
    std::cout << (wide ? chosen + "\n" : Wrap(chosen, kNarrowWidth, 2));
  }
  if (time_unknown) std::cout << "TIME ?: pass --tokens N (the token budget) for the time and cost of the run\n";
  if (!resp.baseline().empty()) std::cout << "cost-performance baseline: " << resp.baseline() << "\n";
  if (!resp.infeasible_summary().empty()) {
    const std::string summary = absl::StrCat("no feasible plan: ", resp.infeasible_summary());
    std::cout << (wide ? summary + "\n" : Wrap(summary, kNarrowWidth, 2));
  }
}

// `plan --mixed`: the job across classes, its groups and what the link between them costs, against
// each class alone and the fastest class on as many cards.
void PrintMixedPlan(const pb::PlanResponse& resp) {
  const pb::MixedPlanResult& m = resp.mixed();
  const bool pipeline = m.kind() == "pipeline across classes";
  std::cout << "\nOne job across classes: " << m.kind()
            << (pipeline ? " (layers by speed within each stage's memory)" : " (the batch split by throughput)")
            << "\n";
  Table table({"CLASS", "CARDS", "LAYOUT", pipeline ? "LAYERS PER STAGE" : "TOKENS/S ALONE", "MEM/CARD", "SHARE"});
  for (const auto& g : m.groups()) {
    std::vector<std::string> layers;
    for (int l : g.stage_layers()) layers.push_back(absl::StrCat(l));
    table.Add({g.label(), absl::StrCat(g.cards()), absl::StrCat("TP", g.tp(), " PP", g.pp(), " DP", g.dp()),
               pipeline ? absl::StrJoin(layers, "+") : absl::StrFormat("%.0f", g.tokens_per_second()),
               absl::StrCat(planner::HumanBytes(g.required_bytes()), " of ", planner::HumanBytes(g.card_bytes())),
               absl::StrFormat("%.1f%%", 100 * g.share())});
  }
  std::cout << table.Render(kNarrowWidth);
  for (const std::string& why : m.left_out()) std::cout << Wrap(absl::StrCat("left out: ", why), kNarrowWidth, 4);
  const double step = m.compute_seconds() + m.link_seconds();
  std::cout << Wrap(
      absl::StrFormat("mixed job: %d cards, %.0f tokens/s; a step of %.0f tokens is %s of compute + %s "
                      "between classes over the network (%.1f%% of the step, %.0f GB/s per card)",
                      m.cards(), m.tokens_per_second(), m.tokens_per_step(), Duration(m.compute_seconds()),
                      Duration(m.link_seconds()), step > 0 ? 100 * m.link_seconds() / step : 0, m.link_gbytes_per_s()),
      kNarrowWidth, 2);
  for (const std::string& note : m.notes()) std::cout << Wrap(absl::StrCat("note: ", note), kNarrowWidth, 4);
  auto against = [&](const std::string& what, const pb::PlanRow& p, double alone) {
    if (alone <= 0) return;
    std::cout << Wrap(
        absl::StrFormat("%s: %s on %d cards (%s), %.0f tokens/s; the mixed job: %+.1f%%", what, p.label(),
                        p.tp() * p.pp() * p.dp(), LayoutName(p), alone, 100 * (m.tokens_per_second() / alone - 1)),
        kNarrowWidth, 2);
  };
  if (!resp.plans().empty()) against("fastest class alone", resp.plans(0), m.fastest_alone_tokens_per_second());
  if (m.has_same_cards()) {
    against(absl::StrCat("fastest class on ", m.cards(), " cards"), m.same_cards(), m.same_cards_tokens_per_second());
  }
}

absl::StatusOr<pb::PlanResponse> PlanOffline(const pb::PlanRequest& request, const std::vector<std::string>& pool_files,
                                             const std::string& prices_file, const std::string& spec_table_file) {
  drivers::SpecTable specs = drivers::SpecTable::Defaults();
  if (!spec_table_file.empty()) {  // the agents' --spec-table, for a what-if on figures they lack
    auto text = ReadTextFile(spec_table_file);
    if (!text.ok()) return text.status();
    if (absl::Status s = specs.MergeJson(*text); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(spec_table_file, ": ", s.message()));
    }
  }
  std::vector<planner::PoolClass> classes;
  for (const std::string& file : pool_files) {
    auto text = ReadTextFile(file);
    if (!text.ok()) return text.status();
    auto inventory = drivers::ParseInventoryJson(*text);
    if (!inventory.ok()) return absl::InvalidArgumentError(absl::StrCat(file, ": ", inventory.status().message()));
    for (DeviceRecord& d : inventory->devices) drivers::ApplyFingerprint(specs, d);
    // Inventories printed on copies of one machine share a host name; the file then names the node.
    std::string node = inventory->hostname;
    const bool taken = std::any_of(classes.begin(), classes.end(), [&](const planner::PoolClass& c) {
      return std::any_of(c.nodes.begin(), c.nodes.end(),
                         [&](const planner::NodeCapacity& n) { return n.node == node; });
    });
    if (node.empty() || taken) node = std::filesystem::path(file).stem().string();
    planner::AddNode(classes, node, *inventory, std::nullopt);
  }
  planner::PriceTable prices;
  if (!prices_file.empty()) {
    auto parsed = ReadPriceTableFile(prices_file);
    if (!parsed.ok()) return parsed.status();
    prices = *std::move(parsed);
  }
  return AnswerPlan(request, classes, prices);
}

struct PlanOptions {
  std::string model, config, mode, precision, optimizer, mixed, recompute, attention, kv_precision, objective, prices,
      layout, spec_table;
  std::vector<std::string> pool;
  int seq = 0, micro_batch = 0, grad_accum = 0, zero = 0, lora_rank = 0, batch = 0, context = 0, cards = 0, prompt = 0,
      prefill_chunk = 0;
  double tokens = 0, global_batch = 0;
  bool dropout = false, lora_all_linear = false, no_sequence_parallel = false, list_models = false, wide = false,
       across_classes = false;
};

void DeclarePlan(FlagSet& flags, PlanOptions* o) {
  flags.String("model", &o->model, "preset name (--list-models shows them)");
  flags.String("config", &o->config, "a Hugging Face config.json instead of a preset");
  flags.CompleteAs("config", ValueCompletion::kFile);
  flags.Bool("list-models", &o->list_models, "print the presets and exit");
  flags.String("mode", &o->mode, "train (default) or infer");
  flags.Values("mode", {"train", "infer"});
  flags.String("precision", &o->precision, "bf16 by default; int8/int4 weights for infer or QLoRA");
  flags.Values("precision", {"fp32", "bf16", "fp16", "fp8", "int8", "int4"});
  flags.String("optimizer", &o->optimizer, "adamw by default");
  flags.Values("optimizer", {"adamw", "adam", "sgd-momentum", "sgd"});
  flags.String("mixed-precision", &o->mixed, "16-bit training: 16-bit weights + fp32 master (default) or autocast");
  flags.Values("mixed-precision", {"master", "autocast"});
  flags.Bool(
      "mixed", &o->across_classes,
      "one training job across the classes (each on its free cards, the batch split by speed) against each alone");
  flags.Int("seq", &o->seq, "training sequence length (default 4096)");
  flags.Int("micro-batch", &o->micro_batch, "sequences per micro-batch per data-parallel rank (default 1)");
  flags.Int("grad-accum", &o->grad_accum,
            "micro-batches per optimizer step (default: chosen per layout within --global-batch)");
  flags.Double("global-batch", &o->global_batch,
               "training: tokens per optimizer step at most, the micro-batches chosen per layout within it "
               "(default by model size: 0.5M up to 1B parameters, 1M up to 6B, 4M above, as GPT-3 and Llama 2)");
  flags.Int("zero", &o->zero, "ZeRO stage over the data-parallel ranks (default 0)");
  flags.Values("zero", {"0", "1", "2", "3"});
  flags.String("recompute", &o->recompute, "activation recomputation (default selective)");
  flags.Values("recompute", {"none", "selective", "full"});
  flags.String("attention", &o->attention, "flash (default) or eager (materialises s x s scores)");
  flags.Values("attention", {"flash", "eager"});
  flags.Bool("dropout", &o->dropout, "the model trains with dropout (adds masks)");
  flags.Bool("no-sequence-parallel", &o->no_sequence_parallel, "tensor parallel without sequence parallelism");
  flags.Int("lora-rank", &o->lora_rank, "train LoRA adapters of this rank on a frozen base");
  flags.Bool("lora-all-linear", &o->lora_all_linear, "adapters on every linear layer (default: Q and V)");
  flags.Int("batch", &o->batch, "inference: concurrent sequences (default 1)");
  flags.Int("context", &o->context, "inference: prompt + generated tokens per sequence (default 4096)");
  flags.Int("prompt", &o->prompt, "inference: prompt tokens per sequence (default: the whole context)");
  flags.Int("prefill-chunk", &o->prefill_chunk, "inference: tokens prefilled at once (default 2048)");
  flags.String("kv-precision", &o->kv_precision, "inference: KV cache precision (default: the serving precision)");
  flags.Values("kv-precision", {"fp32", "bf16", "fp16", "fp8", "int8", "int4"});
  flags.Double("tokens", &o->tokens, "token budget (trained, or generated), e.g. 2e9");
  flags.Int("cards", &o->cards, "use exactly this many cards (default: the fewest that fit)");
  flags.String("layout", &o->layout, "evaluate this layout on every class, e.g. tp8,pp2,dp4 (not with --cards)");
  flags.String("objective", &o->objective, "rank by cost (default), time, or now (what can start at once first)");
  flags.Values("objective", {"cost", "time", "now"});
  flags.List("pool", &o->pool, "plan offline against these inventory files (hetpool-agent --print-inventory)");
  flags.CompleteAs("pool", ValueCompletion::kFile);
  flags.String("prices", &o->prices, "offline: price table JSON (docs/planner.md)");
  flags.String("spec-table", &o->spec_table,
               "offline: card specs added to or replacing the defaults (docs/fingerprints.md)");
  flags.CompleteAs("spec-table", ValueCompletion::kFile);
  flags.CompleteAs("prices", ValueCompletion::kFile);
  flags.Bool("wide", &o->wide, "every column (fingerprint, headroom, cost-performance, notes); default: 100 columns");
}

int Plan(Client& client, const Invocation& in, const PlanOptions& options) {
  PlanOptions o = options;
  // Inventory files may follow --pool as separate words: --pool a.json b.json.
  if (!in.operands.empty()) {
    if (o.pool.empty()) return in.Usage("plan takes no positional arguments (files follow --pool)");
    o.pool.insert(o.pool.end(), in.operands.begin(), in.operands.end());
  }
  if (o.list_models) {
    Table table({"PRESET", "FAMILY", "PARAMS", "ACTIVE", "LAYERS", "HIDDEN", "HEADS", "KV HEADS", "VOCAB", "CONTEXT"});
    for (const planner::ModelSpec& m : planner::Presets()) {
      table.Add({m.name, m.family, Params(m.TotalParams()), Params(m.ActiveParams()), absl::StrCat(m.layers),
                 absl::StrCat(m.hidden), absl::StrCat(m.heads), absl::StrCat(m.kv_heads), absl::StrCat(m.vocab),
                 absl::StrCat(m.max_context)});
    }
    std::cout << table.Render();
    return 0;
  }
  if (!o.prices.empty() && o.pool.empty())
    return in.Usage("--prices is for offline planning with --pool (hetpoold has its own --prices)");
  if (!o.spec_table.empty() && o.pool.empty()) {
    return in.Usage("--spec-table is for offline planning with --pool (agents have their own --spec-table)");
  }

  pb::PlanRequest req;
  req.mutable_model()->set_preset(o.model);
  if (!o.config.empty()) {
    auto text = ReadTextFile(o.config);
    if (!text.ok()) return Error(text.status());
    req.mutable_model()->set_config_json(*text);
    req.mutable_model()->set_name(o.config);
  }
  pb::Workload& w = *req.mutable_workload();
  w.set_mode(o.mode);
  w.set_precision(o.precision);
  w.set_optimizer(o.optimizer);
  w.set_mixed_precision(o.mixed);
  w.set_recompute(o.recompute);
  w.set_attention(o.attention);
  w.set_kv_precision(o.kv_precision);
  w.set_dropout(o.dropout);
  w.set_no_sequence_parallel(o.no_sequence_parallel);
  w.set_lora_all_linear(o.lora_all_linear);
  // Only what was given is sent, so the planner's defaults apply and a given 0 is an error.
  if (in.flags.WasSet("seq")) w.set_seq(o.seq);
  if (in.flags.WasSet("micro-batch")) w.set_micro_batch(o.micro_batch);
  if (in.flags.WasSet("grad-accum")) w.set_grad_accum(o.grad_accum);
  if (in.flags.WasSet("global-batch")) w.set_global_batch_tokens(static_cast<int64_t>(o.global_batch));
  if (in.flags.WasSet("zero")) w.set_zero_stage(o.zero);
  if (in.flags.WasSet("lora-rank")) w.set_lora_rank(o.lora_rank);
  if (in.flags.WasSet("batch")) w.set_batch(o.batch);
  if (in.flags.WasSet("context")) w.set_context(o.context);
  if (in.flags.WasSet("prompt")) w.set_prompt(o.prompt);
  if (in.flags.WasSet("prefill-chunk")) w.set_prefill_chunk(o.prefill_chunk);
  if (in.flags.WasSet("tokens")) w.set_tokens(o.tokens);
  req.set_objective(o.objective);
  req.set_cards(o.cards);
  req.set_mixed(o.across_classes);
  if (!o.layout.empty()) {
    auto layout = ParseLayout(o.layout);
    if (!layout.ok()) return in.Usage(std::string(layout.status().message()));
    *req.mutable_layout() = *layout;
  }

  absl::StatusOr<pb::PlanResponse> resp;
  if (!o.pool.empty()) {
    resp = PlanOffline(req, o.pool, o.prices, o.spec_table);
  } else {
    pb::PlanResponse answer;
    auto status = client.planner().Plan(client.Context().get(), req, &answer);
    if (!status.ok()) return client.Failed(status);
    resp = std::move(answer);
  }
  if (!resp.ok()) return Error(resp.status());
  if (client.json()) {
    std::cout << ToJson(*resp);
  } else {
    PrintPlans(*resp, o.wide);
    if (resp->has_mixed()) PrintMixedPlan(*resp);
  }
  return resp->infeasible_summary().empty() ? 0 : kExitError;
}

}  // namespace

std::vector<CommandEntry> PlanCommands() {
  return {{.name = "plan",
           .synopsis = "--model NAME|--config FILE",
           .summary = "ranked plans per class of cards: count, layout, memory per card, time, cost",
           .details = "Against hetpoold's live pool, or offline against inventory files (--pool FILE...).",
           .examples =
               {"hetpoolctl plan --model llama-2-13b --mode train --precision bf16 --seq 4096 --tokens 2e9 --zero 3",
                "hetpoolctl plan --model llama-2-70b --mode infer --precision int4 --batch 8 --objective now",
                "hetpoolctl plan --model qwen2-7b --pool node-a.json node-b.json --prices prices.json"},
           .operands = Operands::kFiles,
           .make = Make<PlanOptions>(DeclarePlan, Plan)}};
}

}  // namespace hetpool::cli
