// sched_throughput: placement decisions per second of the daemon's policy (the default plugin
// profile, scheduler/framework/profile.h) on a
// synthetic pool, and latency per decision by job shape. Figures go to docs/benchmarks.md.
//   sched_throughput [--nodes 5000] [--jobs 100000] [--seed 1] [-o json]
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

#include "drivers/fingerprint/fingerprint.h"
#include "nlohmann/json.hpp"
#include "tests/bench/percentile.h"
#include "scheduler/framework/profile.h"

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

}  // namespace

int main(int argc, char** argv) {
  int nodes_n = 5000, jobs_n = 100000;
  uint64_t seed = 1;
  std::string output = "table";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--nodes") nodes_n = std::stoi(value);
    else if (flag == "--jobs") jobs_n = std::stoi(value);
    else if (flag == "--seed") seed = std::stoull(value);
    else if (flag == "-o") output = value;
    else {
      std::cerr << "sched_throughput: unknown flag " << flag << "\n";
      return 2;
    }
  }
  std::mt19937_64 rng(seed);
  const auto specs = hetpool::drivers::SpecTable::Defaults();
  // Devices live in one vector per node; views point into them.
  std::vector<std::vector<DeviceRecord>> devices(static_cast<size_t>(nodes_n));
  std::vector<sched::NodeView> views(static_cast<size_t>(nodes_n));
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
    auto& v = views[static_cast<size_t>(n)];
    v.name = "node-" + std::to_string(n);
    v.schedulable = true;
    v.context.torch_devices = {"cuda", "mlu", "xpu", "cpu"};
    for (const auto& d : devs) v.devices.push_back({&d, true, 1000, d.memory_mib});
    v.generation = static_cast<uint64_t>(n) + 1;
  }
  // The bench owns the views, so it counts their changes (as the daemon's ContentGeneration would
  // show them): one counter for the pool, so no two views share a generation.
  uint64_t generation = static_cast<uint64_t>(nodes_n);
  std::unordered_map<std::string, size_t> index_of;
  for (size_t n = 0; n < views.size(); ++n) index_of[views[n].name] = n;

  enum Shape { kOne, kHalf, kEight, kGang };
  const char* kShapeNames[] = {"one_card", "half_card", "eight_cards", "gang_32"};
  std::discrete_distribution<int> pick_shape({0.70, 0.20, 0.08, 0.02});
  std::map<int, std::vector<double>> latency_us;
  std::map<int, int> placed;
  std::vector<double> placing_us, refusing_us;  // by outcome: a full pool only refuses
  auto framework = sched::DefaultFramework();
  sched::PlacementPolicy& policy = *framework;
  const auto start = std::chrono::steady_clock::now();
  for (int j = 0; j < jobs_n; ++j) {
    const int shape = pick_shape(rng);
    sched::PlacementRequest req;
    req.nnodes = shape == kGang ? 4 : 1;
    req.devices_per_node = shape == kEight || shape == kGang ? 8 : 1;
    if (shape == kHalf) req.device_milli = 500;
    const auto t0 = std::chrono::steady_clock::now();
    auto placement = policy.Place(req, views);
    const auto t1 = std::chrono::steady_clock::now();
    const double us = std::chrono::duration<double, std::micro>(t1 - t0).count();
    latency_us[shape].push_back(us);
    (placement.ok() ? placing_us : refusing_us).push_back(us);
    if (!placement.ok()) continue;
    ++placed[shape];
    for (const auto& a : placement->nodes) {
      auto& v = views[index_of.at(a.node)];
      v.generation = ++generation;
      for (auto& dv : v.devices) {
        if (std::find(a.device_ids.begin(), a.device_ids.end(), dv.device->id) == a.device_ids.end()) continue;
        dv.free = false;
        dv.milli_free -= a.device_milli;
        dv.memory_free_mib -= std::min(dv.memory_free_mib, a.device_memory_mib);
      }
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  nlohmann::json by_outcome = nlohmann::json::object();
  for (const auto& [name, lat] : {std::pair<const char*, const std::vector<double>&>{"placed", placing_us},
                                  {"refused", refusing_us}}) {
    double total_us = 0;
    for (double us : lat) total_us += us;
    by_outcome[name] = {{"decisions", lat.size()},
                        {"decisions_per_second", total_us > 0 ? static_cast<double>(lat.size()) / (total_us / 1e6) : 0},
                        {"p50_ms", Percentile(lat, 0.5) / 1000}, {"p99_ms", Percentile(lat, 0.99) / 1000}};
  }
  nlohmann::json shapes = nlohmann::json::object();
  for (const auto& [shape, lat] : latency_us) {
    shapes[kShapeNames[shape]] = {{"decisions", lat.size()}, {"placed", placed[shape]},
                                  {"p50_ms", Percentile(lat, 0.5) / 1000}, {"p99_ms", Percentile(lat, 0.99) / 1000}};
  }
  const nlohmann::json result = {{"nodes", nodes_n},
                                 {"cards", nodes_n * 8},
                                 {"jobs", jobs_n},
                                 {"seconds", seconds},
                                 {"decisions_per_second", jobs_n / seconds},
                                 {"by_outcome", by_outcome},
                                 {"shapes", shapes}};
  if (output == "json") {
    std::cout << result.dump(2) << "\n";
  } else {
    std::cout << nodes_n << " nodes x 8 cards, " << jobs_n << " jobs: " << jobs_n / seconds << " decisions/s\n";
    for (const auto& [name, o] : by_outcome.items()) std::cout << "  " << name << ": " << o.dump() << "\n";
    for (const auto& [name, s] : shapes.items()) std::cout << "  " << name << ": " << s.dump() << "\n";
  }
  return 0;
}
