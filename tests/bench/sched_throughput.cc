// sched_throughput: placement decisions per second of the daemon's policy (the default plugin
// profile, scheduler/framework/profile.h) on a synthetic pool, and latency per decision by job
// shape, measured two ways. Figures go to docs/benchmarks.md.
//   sched_throughput [--nodes 5000] [--jobs 100000] [--seed 1] [--mode both|place|cycle] [-o json]
// place: `Place` alone, on views the bench owns (placements applied between decisions).
// cycle: the daemon's own scheduling cycle (ClusterState::Tick: queue order, the head-of-line
//   reservation, Schedule + Bind = claims, launch plans and a store write per placement, pending
//   reasons), with every job queued first and every node registered through Register. The store
//   keeps serialized rows in memory (no disk): the figure is the cycle's CPU cost. The daemon's
//   log lines go to stderr (hetpoold logs every placement at info).
// Pool: 8 cards per node, a mix of H100 (NVSwitch), A100 (bridged pairs), MetaX C500 (MetaXLink
// zones), MLU370 (MLU-Link groups) and Intel Max 1550 (Xe Link). Jobs: 70% one card, 20% half a
// card, 8% eight cards, 2% 32-card gangs (4 nodes x 8); placements are applied as they are made,
// and a job that does not fit counts as a decision too.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <random>
#include <unordered_map>

#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"
#include "drivers/fingerprint/fingerprint.h"
#include "nlohmann/json.hpp"
#include "scheduler/framework/profile.h"
#include "src/common/convert.h"
#include "src/daemon/state/cluster_state.h"
#include "tests/bench/percentile.h"
#include "tests/testing/memory_store.h"

namespace {

using hetpool::DeviceRecord;
using hetpool::LinkKind;
using hetpool::Vendor;
namespace sched = hetpool::scheduler;

struct Model {
  Vendor vendor;
  std::string name;
  uint64_t memory_mib;
  int major, minor;
  LinkKind fabric;
  int group;  // cards per fully linked group
  int lanes;
  double share;
};

const Model kModels[] = {
    {Vendor::kNvidia, "NVIDIA H100 80GB HBM3", 81559, 9, 0, LinkKind::kNvLink, 8, 18, 0.5},
    {Vendor::kNvidia, "NVIDIA A100 80GB PCIe", 81920, 8, 0, LinkKind::kNvLink, 2, 12, 0.2},
    {Vendor::kMetax, "MetaX C500", 65536, 0, 0, LinkKind::kMetaxLink, 4, 2, 0.1},
    {Vendor::kCambricon, "MLU370-X8", 49152, 0, 0, LinkKind::kMluLink, 4, 2, 0.1},
    {Vendor::kIntel, "Intel(R) Data Center GPU Max 1550", 131072, 0, 0, LinkKind::kXeLink, 8, 4, 0.1},
};

using hetpool::bench::Percentile;
namespace pb = ::hetpool::v1;

enum Shape { kOne, kHalf, kEight, kGang };
const char* const kShapeNames[] = {"one_card", "half_card", "eight_cards", "gang_32"};

// The pool: 8 cards per node of one model, with its link groups.
std::vector<std::vector<DeviceRecord>> MakePool(int nodes_n, std::mt19937_64& rng) {
  const auto specs = hetpool::drivers::SpecTable::Defaults();
  std::vector<std::vector<DeviceRecord>> devices(static_cast<size_t>(nodes_n));
  std::discrete_distribution<int> pick_model({0.5, 0.2, 0.1, 0.1, 0.1});
  for (int n = 0; n < nodes_n; ++n) {
    const Model& m = kModels[pick_model(rng)];
    auto& devs = devices[static_cast<size_t>(n)];
    for (int i = 0; i < 8; ++i) {
      DeviceRecord d;
      d.vendor = m.vendor;
      d.index = i;
      d.id = std::string(hetpool::VendorName(m.vendor)) + std::to_string(i);
      d.model = m.name;
      d.memory_mib = m.memory_mib;
      d.capability.arch_major = m.major;
      d.capability.arch_minor = m.minor;
      devs.push_back(d);
    }
    for (int i = 0; i < 8; ++i) {
      for (int j = 0; j < 8; ++j) {
        if (i == j) continue;
        const bool same_group = i / m.group == j / m.group;
        devs[static_cast<size_t>(i)].links.push_back(
            {devs[static_cast<size_t>(j)].id, same_group ? m.fabric : (i / 4 == j / 4 ? LinkKind::kPcieHostBridge : LinkKind::kCrossSocket),
             same_group ? m.lanes : 1});
      }
    }
    for (auto& d : devs) hetpool::drivers::ApplyFingerprint(specs, d);
  }
  return devices;
}

std::vector<int> MakeShapes(int jobs_n, std::mt19937_64& rng) {
  std::discrete_distribution<int> pick_shape({0.70, 0.20, 0.08, 0.02});
  std::vector<int> shapes;
  shapes.reserve(static_cast<size_t>(jobs_n));
  for (int j = 0; j < jobs_n; ++j) shapes.push_back(pick_shape(rng));
  return shapes;
}

// Decisions, outcome and latency per decision, in decision order.
struct Decisions {
  std::vector<double> us;
  std::vector<bool> placed;
};

nlohmann::json Summary(const Decisions& d, const std::vector<int>& shapes, double seconds) {
  std::map<int, std::vector<double>> by_shape;
  std::map<int, int> placed_by_shape;
  std::vector<double> placing_us, refusing_us;
  for (size_t i = 0; i < d.us.size(); ++i) {
    by_shape[shapes[i]].push_back(d.us[i]);
    placed_by_shape[shapes[i]] += d.placed[i] ? 1 : 0;
    (d.placed[i] ? placing_us : refusing_us).push_back(d.us[i]);
  }
  nlohmann::json by_outcome = nlohmann::json::object();
  for (const auto& [name, lat] : {std::pair<const char*, const std::vector<double>&>{"placed", placing_us},
                                  {"refused", refusing_us}}) {
    double total_us = 0;
    for (double us : lat) total_us += us;
    by_outcome[name] = {{"decisions", lat.size()},
                        {"decisions_per_second", total_us > 0 ? static_cast<double>(lat.size()) / (total_us / 1e6) : 0},
                        {"p50_ms", Percentile(lat, 0.5) / 1000}, {"p99_ms", Percentile(lat, 0.99) / 1000}};
  }
  nlohmann::json by_shape_json = nlohmann::json::object();
  for (const auto& [shape, lat] : by_shape) {
    by_shape_json[kShapeNames[shape]] = {{"decisions", lat.size()}, {"placed", placed_by_shape[shape]},
                                         {"p50_ms", Percentile(lat, 0.5) / 1000}, {"p99_ms", Percentile(lat, 0.99) / 1000}};
  }
  return {{"decisions", d.us.size()},
          {"seconds", seconds},
          {"decisions_per_second", seconds > 0 ? static_cast<double>(d.us.size()) / seconds : 0},
          {"by_outcome", by_outcome},
          {"shapes", by_shape_json}};
}

// `Place` alone on views the bench owns.
nlohmann::json RunPlace(const std::vector<std::vector<DeviceRecord>>& devices, const std::vector<int>& shapes) {
  std::vector<sched::NodeView> views(devices.size());
  for (size_t n = 0; n < devices.size(); ++n) {
    auto& v = views[n];
    v.name = "node-" + std::to_string(n);
    v.schedulable = true;
    v.context.torch_devices = {"cuda", "mlu", "xpu", "cpu"};
    for (const auto& d : devices[n]) v.devices.push_back({&d, true, 1000, d.memory_mib});
    v.generation = static_cast<uint64_t>(n) + 1;
  }
  // The bench owns the views, so it counts their changes (as the daemon's ContentGeneration would
  // show them): one counter for the pool, so no two views share a generation.
  uint64_t generation = devices.size();
  std::unordered_map<std::string, size_t> index_of;
  for (size_t n = 0; n < views.size(); ++n) index_of[views[n].name] = n;
  auto framework = sched::DefaultFramework();
  sched::PlacementPolicy& policy = *framework;
  Decisions decisions;
  const auto start = std::chrono::steady_clock::now();
  for (int shape : shapes) {
    sched::PlacementRequest req;
    req.nnodes = shape == kGang ? 4 : 1;
    req.devices_per_node = shape == kEight || shape == kGang ? 8 : 1;
    if (shape == kHalf) req.device_milli = 500;
    const auto t0 = std::chrono::steady_clock::now();
    auto placement = policy.Place(req, views);
    const auto t1 = std::chrono::steady_clock::now();
    decisions.us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    decisions.placed.push_back(placement.ok());
    if (!placement.ok()) continue;
    for (const auto& a : placement->nodes) {
      auto& v = views[index_of.at(a.node)];
      v.generation = ++generation;
      sched::TakeOnView(req, a, v);
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Summary(decisions, shapes, seconds);
}

// Records each decision of the cycle (ClusterState reports them in queue order).
class DecisionRecorder final : public hetpool::daemon::StateObserver {
 public:
  void Decision(absl::Duration took, bool placed) override {
    decisions.us.push_back(absl::ToDoubleMicroseconds(took));
    decisions.placed.push_back(placed);
  }
  void StoreWrite(absl::Duration, bool) override {}
  void SchedulingPass(absl::Duration, bool) override {}
  void JobEnded(const pb::Job&) override {}
  void JobRestarted(const hetpool::v1::Job&, const std::string&) override {}
  Decisions decisions;
};

// The daemon's scheduling cycle: every job queued (while no node is registered, so submission
// costs no feasibility check), every node registered, then one full cycle over the queue.
nlohmann::json RunCycle(const std::vector<std::vector<DeviceRecord>>& devices, const std::vector<int>& shapes) {
  hetpool::testing::MemoryStore store;  // what a store costs minus the disk
  DecisionRecorder recorder;
  auto framework = sched::DefaultFramework();
  hetpool::daemon::ClusterOptions options;
  options.observer = &recorder;
  options.lease_ttl = absl::Hours(1);  // the cycle must not see nodes expire while it runs
  hetpool::daemon::ClusterState state(options, &store, framework.get());
  if (auto s = state.Load(); !s.ok()) {
    std::cerr << "sched_throughput: " << s << "\n";
    std::exit(1);
  }
  const auto submit_start = std::chrono::steady_clock::now();
  for (int shape : shapes) {
    pb::JobSpec spec;
    spec.set_user("bench");
    spec.set_working_dir("/tmp");
    spec.add_command("/bin/true");
    spec.set_nnodes(shape == kGang ? 4 : 1);
    spec.set_devices_per_node(shape == kEight || shape == kGang ? 8 : 1);
    if (shape == kHalf) spec.set_device_milli(500);
    if (auto job = state.Submit(spec, ""); !job.ok()) {
      std::cerr << "sched_throughput: submit: " << job.status() << "\n";
      std::exit(1);
    }
  }
  const double submit_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - submit_start).count();
  for (size_t n = 0; n < devices.size(); ++n) {
    pb::RegisterRequest req;
    req.set_node_name("node-" + std::to_string(n));
    req.set_address("10.0." + std::to_string(n / 250) + "." + std::to_string(n % 250));
    req.set_torchrun_path("/usr/bin/torchrun");
    req.set_work_dir("/var/lib/hetpool");
    hetpool::NodeInventory inventory;
    inventory.devices = devices[n];
    *req.mutable_inventory() = hetpool::ToProto(inventory);
    if (auto r = state.Register(req); !r.ok()) {
      std::cerr << "sched_throughput: register: " << r.status() << "\n";
      std::exit(1);
    }
  }
  const auto start = std::chrono::steady_clock::now();
  state.Tick();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  nlohmann::json out = Summary(recorder.decisions, shapes, seconds);
  out["submit_seconds"] = submit_seconds;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int nodes_n = 5000, jobs_n = 100000;
  uint64_t seed = 1;
  std::string output = "table", mode = "both";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--nodes") nodes_n = std::stoi(value);
    else if (flag == "--jobs") jobs_n = std::stoi(value);
    else if (flag == "--seed") seed = std::stoull(value);
    else if (flag == "--mode") mode = value;
    else if (flag == "-o") output = value;
    else {
      std::cerr << "sched_throughput: unknown flag " << flag << "\n";
      return 2;
    }
  }
  if (mode != "both" && mode != "place" && mode != "cycle") {
    std::cerr << "sched_throughput: --mode is both, place or cycle\n";
    return 2;
  }
  // The daemon's info lines (one per scheduled job) go to stderr, as hetpoold's do, so that stdout
  // stays the result; run with 2>/dev/null to keep their cost and drop the text.
  spdlog::set_default_logger(spdlog::stderr_logger_mt("sched_throughput"));
  std::mt19937_64 rng(seed);
  const auto devices = MakePool(nodes_n, rng);
  const std::vector<int> shapes = MakeShapes(jobs_n, rng);
  nlohmann::json result = {{"nodes", nodes_n}, {"cards", nodes_n * 8}, {"jobs", jobs_n}};
  if (mode != "cycle") result["place"] = RunPlace(devices, shapes);
  if (mode != "place") result["cycle"] = RunCycle(devices, shapes);
  if (output == "json") {
    std::cout << result.dump(2) << "\n";
    return 0;
  }
  for (const char* part : {"place", "cycle"}) {
    if (!result.contains(part)) continue;
    const auto& r = result[part];
    std::cout << part << ": " << nodes_n << " nodes x 8 cards, " << jobs_n << " jobs: "
              << r["decisions_per_second"].get<double>() << " decisions/s\n";
    for (const auto& [name, o] : r["by_outcome"].items()) std::cout << "  " << name << ": " << o.dump() << "\n";
    for (const auto& [name, sh] : r["shapes"].items()) std::cout << "  " << name << ": " << sh.dump() << "\n";
  }
  return 0;
}
