// trace_replay: GPU allocation ratio of placement policies on the Alibaba GPU trace, under the FGD
// paper's protocol (scheduler/trace/trace_replay.h). Figures go to docs/benchmarks.md.
//   trace_replay --trace-dir ../shared/traces/alibaba-gpu-v2023/csv --workload default
//                --seeds 42-51 --policy default|fgd|bestfit|packing|random [--typical-pct 95]
//                [--typical-step 1] [--score sigmoid|raw] [--score-levels 100] [-o json]
#include <iostream>
#include <numeric>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "scheduler/trace/trace_replay.h"

int main(int argc, char** argv) {
  std::string dir = "../shared/traces/alibaba-gpu-v2023/csv", workload = "default", seeds = "42-51",
              policy_name = "default", output = "table";
  double typical_pct = 95;
  int score_levels = 0, typical_step = 1;
  bool sigmoid = true;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--trace-dir") dir = value;
    else if (flag == "--workload") workload = value;
    else if (flag == "--seeds") seeds = value;
    else if (flag == "--policy") policy_name = value;
    else if (flag == "-o") output = value;
    else if (flag == "--typical-pct") typical_pct = std::stod(value);
    else if (flag == "--score-levels") score_levels = std::stoi(value);
    else if (flag == "--typical-step") typical_step = std::stoi(value);
    else if (flag == "--score" && (value == "raw" || value == "sigmoid")) sigmoid = value == "sigmoid";
    else if (flag == "--score") {
      std::cerr << "trace_replay: --score expects sigmoid or raw, got " << value << "\n";
      return 2;
    }
    else {
      std::cerr << "trace_replay: unknown flag " << flag << "\n";
      return 2;
    }
  }
  auto policy = hetpool::scheduler::trace::ParsePolicy(policy_name);
  if (!policy.ok()) {
    std::cerr << "trace_replay: " << policy.status().message() << "\n";
    return 2;
  }
  int first = 0, last = 0;
  std::vector<std::string> range = absl::StrSplit(seeds, '-');
  if (range.empty() || !absl::SimpleAtoi(range[0], &first) ||
      !absl::SimpleAtoi(range.size() > 1 ? range[1] : range[0], &last) || last < first) {
    std::cerr << "trace_replay: --seeds expects A-B\n";
    return 2;
  }
  auto nodes = hetpool::scheduler::trace::LoadNodes(dir + "/openb_node_list_gpu_node.csv");
  auto pods = hetpool::scheduler::trace::LoadPods(dir + "/openb_pod_list_" + workload + ".csv");
  if (!nodes.ok() || !pods.ok()) {
    std::cerr << "trace_replay: " << (nodes.ok() ? pods.status() : nodes.status()).message() << "\n";
    return 1;
  }
  nlohmann::json per_seed = nlohmann::json::array();
  std::vector<double> ratios;
  double seconds = 0;
  for (int seed = first; seed <= last; ++seed) {
    hetpool::scheduler::trace::ReplayOptions options;
    options.policy = *policy;
    options.seed = static_cast<uint64_t>(seed);
    options.typical_shapes_pct = typical_pct;
    options.score_levels = score_levels;
    options.typical_shapes_step = typical_step;
    options.sigmoid_scores = sigmoid;
    auto r = hetpool::scheduler::trace::Replay(*nodes, *pods, options);
    ratios.push_back(r.allocation_ratio * 100);
    seconds += r.seconds;
    per_seed.push_back({{"seed", seed}, {"allocation_ratio", r.allocation_ratio * 100}, {"demand_ratio", r.demand_ratio * 100},
                        {"pods", r.pods}, {"placed", r.placed}, {"failed", r.failed}, {"seconds", r.seconds}});
  }
  const double mean = std::accumulate(ratios.begin(), ratios.end(), 0.0) / static_cast<double>(ratios.size());
  if (output == "json") {
    std::cout << nlohmann::json{{"workload", workload}, {"policy", hetpool::scheduler::trace::PolicyName(*policy)},
                                {"tie_break", *policy == hetpool::scheduler::trace::Policy::kDefault
                                                  ? "CPU-only tasks: least free GPU; GPU tasks: a node in use before an idle one; then earliest node in a fixed per-seed random order"
                                                  : "earliest node in a fixed per-seed random order"},
                                {"typical_shapes_pct", typical_pct}, {"typical_shapes_step", typical_step},
                                {"score", sigmoid ? "sigmoid" : "raw"}, {"score_levels", score_levels},
                                {"mean_allocation_ratio", mean}, {"seeds", per_seed}, {"seconds", seconds}}
                     .dump(2)
              << "\n";
  } else {
    std::cout << workload << " " << hetpool::scheduler::trace::PolicyName(*policy) << " mean " << mean << "% over "
              << ratios.size() << " seeds (" << seconds << " s)\n";
  }
  return 0;
}
