// trace_replay: GPU allocation ratio of a scheduler profile on the Alibaba GPU trace, under the
// FGD paper's protocol (scheduler/trace/trace_replay.h). The profile is what hetpoold
// --scheduler-profile takes; "default" is the one hetpoold runs without it. Figures go to
// docs/benchmarks.md.
//   trace_replay --trace-dir ../shared/traces/alibaba-gpu-v2023/csv --workload default
//                --seeds 42-51 --scheduler-profile default|FILE [--typical-pct 95]
//                [--typical-step 1] [-o json]
#include <fstream>
#include <iostream>
#include <numeric>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "scheduler/framework/profile.h"
#include "scheduler/trace/trace_replay.h"

namespace trace = hetpool::scheduler::trace;

int main(int argc, char** argv) {
  std::string dir = "../shared/traces/alibaba-gpu-v2023/csv", workload = "default", seeds = "42-51",
              profile = "default", output = "table";
  double typical_pct = 95;
  int typical_step = 1;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::cerr << "trace_replay: " << flag << " needs a value\n";
      return 2;
    }
    const std::string value = argv[i + 1];
    bool number_ok = true;
    if (flag == "--trace-dir")
      dir = value;
    else if (flag == "--workload")
      workload = value;
    else if (flag == "--seeds")
      seeds = value;
    else if (flag == "--scheduler-profile")
      profile = value;
    else if (flag == "-o")
      output = value;
    else if (flag == "--typical-pct")
      number_ok = absl::SimpleAtod(value, &typical_pct);
    else if (flag == "--typical-step")
      number_ok = absl::SimpleAtoi(value, &typical_step);
    else {
      std::cerr << "trace_replay: unknown flag " << flag
                << " (--trace-dir, --workload, --seeds, --scheduler-profile, --typical-pct, --typical-step, -o)\n";
      return 2;
    }
    if (!number_ok) {
      std::cerr << "trace_replay: " << flag << " expects a number, got " << value << "\n";
      return 2;
    }
  }
  std::string profile_json;
  if (profile == "default") {
    profile_json = std::string(hetpool::scheduler::DefaultProfileJson());
  } else {
    std::ifstream in(profile);
    if (!in) {
      std::cerr << "trace_replay: --scheduler-profile " << profile << ": cannot be read\n";
      return 2;
    }
    std::stringstream text;
    text << in.rdbuf();
    profile_json = text.str();
  }
  int first = 0, last = 0;
  std::vector<std::string> range = absl::StrSplit(seeds, '-');
  if (range.empty() || !absl::SimpleAtoi(range[0], &first) ||
      !absl::SimpleAtoi(range.size() > 1 ? range[1] : range[0], &last) || last < first) {
    std::cerr << "trace_replay: --seeds expects A-B\n";
    return 2;
  }
  auto nodes = trace::LoadNodes(dir + "/openb_node_list_gpu_node.csv");
  auto pods = trace::LoadPods(dir + "/openb_pod_list_" + workload + ".csv");
  if (!nodes.ok() || !pods.ok()) {
    std::cerr << "trace_replay: " << (nodes.ok() ? pods.status() : nodes.status()).message() << "\n";
    return 1;
  }
  nlohmann::json per_seed = nlohmann::json::array();
  std::vector<double> ratios;
  double seconds = 0;
  for (int seed = first; seed <= last; ++seed) {
    trace::ReplayOptions options;
    options.profile_json = profile_json;
    options.seed = static_cast<uint64_t>(seed);
    options.typical_shapes_pct = typical_pct;
    options.typical_shapes_step = typical_step;
    auto r = trace::Replay(*nodes, *pods, options);
    if (!r.ok()) {
      std::cerr << "trace_replay: --scheduler-profile " << profile << ": " << r.status().message() << "\n";
      return 2;
    }
    ratios.push_back(r->allocation_ratio * 100);
    seconds += r->seconds;
    per_seed.push_back({{"seed", seed},
                        {"allocation_ratio", r->allocation_ratio * 100},
                        {"demand_ratio", r->demand_ratio * 100},
                        {"pods", r->pods},
                        {"placed", r->placed},
                        {"failed", r->failed},
                        {"seconds", r->seconds}});
  }
  const double mean = std::accumulate(ratios.begin(), ratios.end(), 0.0) / static_cast<double>(ratios.size());
  if (output == "json") {
    std::cout << nlohmann::json{{"workload", workload},
                                {"scheduler_profile", profile},
                                {"typical_shapes_pct", typical_pct},
                                {"typical_shapes_step", typical_step},
                                {"mean_allocation_ratio", mean},
                                {"seeds", per_seed},
                                {"seconds", seconds}}
                     .dump(2)
              << "\n";
  } else {
    std::cout << workload << " " << profile << " mean " << mean << "% over " << ratios.size() << " seeds (" << seconds
              << " s)\n";
  }
  return 0;
}
