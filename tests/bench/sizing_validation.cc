// sizing_validation: trains small GPT-style models on this machine's CPU PyTorch for a few steps
// (tests/bench/sizing_worker.py), measures their peak memory and compares it with the planner's
// estimate for the same configuration. Target: every estimate within +-15% of the measurement.
// Figures and the command that produced them: docs/benchmarks.md.
//
//   build/tests/sizing_validation [--python /usr/bin/python3] [--only NAME] [--steps 2] [-o json]
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "planner/memory.h"
#include "planner/model.h"

namespace {

using hetpool::Precision;
using namespace hetpool::planner;

struct Case {
  std::string name;
  ModelSpec model;
  Workload workload;
};

ModelSpec Gpt(const std::string& name, int64_t layers, int64_t hidden, int64_t heads, int64_t inter, int64_t vocab) {
  ModelSpec m;
  m.name = name;
  m.layers = layers, m.hidden = hidden, m.heads = heads, m.kv_heads = heads, m.head_dim = hidden / heads;
  m.intermediate = inter, m.vocab = vocab;
  return m;
}

Workload Train(int64_t seq, int64_t micro_batch) {
  Workload w;
  w.precision = Precision::kFp32;
  w.seq = seq, w.micro_batch = micro_batch;
  w.attention = AttentionKernel::kEager;  // torch 1.13 on CPU has no fused attention
  w.recompute = Recompute::kNone;
  return w;
}

std::vector<Case> Cases() {
  const ModelSpec small = Gpt("gpt-12m", 4, 256, 4, 704, 16384);
  const ModelSpec medium = Gpt("gpt-49m", 10, 512, 8, 1408, 16384);
  const ModelSpec large = Gpt("gpt-134m", 12, 768, 12, 2048, 32000);
  std::vector<Case> cases;
  cases.push_back({"gpt-12m fp32", small, Train(256, 8)});
  Workload dropout = Train(256, 8);
  dropout.dropout = true;
  cases.push_back({"gpt-12m fp32 dropout", small, dropout});
  Workload autocast = Train(256, 8);
  autocast.precision = Precision::kBf16, autocast.mixed = MixedPrecision::kAutocast;
  cases.push_back({"gpt-12m bf16 autocast", small, autocast});
  cases.push_back({"gpt-49m fp32", medium, Train(256, 4)});
  Workload full = Train(512, 4);
  full.recompute = Recompute::kFull;
  cases.push_back({"gpt-49m fp32 full-recompute", medium, full});
  cases.push_back({"gpt-134m fp32", large, Train(256, 2)});
  return cases;
}

std::string WorkerCommand(const std::string& python, const std::string& worker, const Case& c, int steps) {
  const Workload& w = c.workload;
  return absl::StrCat("MALLOC_MMAP_THRESHOLD_=65536 ", python, " ", worker, " --layers ", c.model.layers, " --hidden ",
                      c.model.hidden, " --heads ", c.model.heads, " --intermediate ", c.model.intermediate, " --vocab ",
                      c.model.vocab, " --seq ", w.seq, " --micro-batch ", w.micro_batch, " --steps ", steps,
                      " --precision ", w.mixed == MixedPrecision::kAutocast ? "bf16-autocast" : "fp32", " --recompute ",
                      w.recompute == Recompute::kFull ? "full" : "none", w.dropout ? " --dropout" : "");
}

}  // namespace

int main(int argc, char** argv) {
  std::string python = "/usr/bin/python3", worker = HETPOOL_SIZING_WORKER, only, output = "table";
  int steps = 2;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--python") python = next();
    else if (a == "--only") only = next();
    else if (a == "--steps") steps = std::atoi(next().c_str());
    else if (a == "-o") output = next();
    else {
      std::cerr << "usage: sizing_validation [--python PATH] [--only NAME] [--steps N] [-o json]\n";
      return 2;
    }
  }
  nlohmann::json results = nlohmann::json::array();
  int failures = 0;
  if (output != "json") {
    std::cout << absl::StrFormat("%-28s %10s %12s %12s %12s %12s %8s\n", "CASE", "PARAMS", "STATES", "ACTIVATIONS",
                                 "ESTIMATE", "MEASURED", "ERROR");
  }
  for (const Case& c : Cases()) {
    if (!only.empty() && c.name.find(only) == std::string::npos) continue;
    const MemoryBreakdown est = EstimateMemory(c.model, c.workload, Layout{});
    const std::string command = WorkerCommand(python, worker, c, steps);
    FILE* pipe = popen(command.c_str(), "r");
    if (!pipe) {
      std::cerr << "cannot run " << command << "\n";
      return 1;
    }
    std::string text;
    char buffer[4096];
    while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) text.append(buffer, n);
    const int status = pclose(pipe);
    auto measured = nlohmann::json::parse(text, nullptr, false);
    if (status != 0 || measured.is_discarded() || !measured.contains("peak_bytes")) {
      std::cerr << c.name << ": worker failed (" << command << "): " << text << "\n";
      return 1;
    }
    const double peak = measured["peak_bytes"].get<double>();
    const double error = (est.Total() - peak) / peak;
    const bool params_match = measured["params"].get<int64_t>() == c.model.TotalParams();
    const bool ok = std::fabs(error) <= 0.15 && params_match;
    failures += ok ? 0 : 1;
    const double states = est.weights + est.gradients + est.optimizer + est.master;
    results.push_back({{"case", c.name}, {"params", c.model.TotalParams()}, {"estimate_bytes", est.Total()},
                       {"states_bytes", states}, {"activation_bytes", est.activations},
                       {"transient_bytes", est.transient}, {"measured_bytes", peak}, {"error", error},
                       {"params_match", params_match}, {"within_15_percent", ok}});
    if (output != "json") {
      constexpr double kMiB = 1024.0 * 1024;
      std::cout << absl::StrFormat("%-28s %9.1fM %9.0f MiB %9.0f MiB %9.0f MiB %9.0f MiB %+7.1f%%%s\n", c.name,
                                   c.model.TotalParams() / 1e6, states / kMiB, (est.activations + est.transient) / kMiB,
                                   est.Total() / kMiB, peak / kMiB, 100 * error, params_match ? "" : " (param count differs)");
      std::cout.flush();
    }
  }
  if (output == "json") std::cout << results.dump(2) << "\n";
  return failures == 0 ? 0 : 1;
}
