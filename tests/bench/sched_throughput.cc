// sched_throughput: placements per second of the daemon's policy (the default plugin profile,
// scheduler/framework/profile.h, or the file --scheduler-profile names, as hetpoold takes it) on
// a synthetic pool kept busy, measured two ways, with refusals counted apart. Figures go to
// docs/benchmarks.md.
//   sched_throughput [--nodes 5000] [--jobs 100000] [--seed 1] [--mode both|place|cycle]
//                    [--utilisation 0.9] [--batch 1000] [--scheduler-profile FILE] [-o json]
// Steady state: jobs finish, oldest first, whenever the next ones would take the cards in use
// past --utilisation of the pool, so every decision is made on a pool about that full (a pool
// that fills and stays full measures how fast it says no: issue 44). The jobs placed before the
// pool first reaches that level are a warm-up and are not counted.
// place: `Place` alone, on views the bench owns (placements taken and given back on them), each
//   job first noted as submitted (the mix the Fgd score weighs); a job refused is dropped.
// cycle: the daemon's own scheduling cycle (ClusterState::Tick: queue order, the head-of-line
//   reservation, Schedule + Bind = claims, launch plans and a store write per placement, pending
//   reasons), every node registered through Register; jobs are submitted --batch at a time
//   through Submit, one Tick places what fits, and jobs end through the agents' heartbeats
//   (Heartbeat, exit code 0), as they do in hetpoold. A job refused waits in the queue and is
//   offered again. The store keeps serialized rows in memory (no disk): the figure is the
//   cycle's CPU cost. The daemon's log lines go to stderr (hetpoold logs every placement at info).
// Pool: 8 cards per node, a mix of H100 (NVSwitch), A100 (bridged pairs), MetaX C500 (MetaXLink
// zones), MLU370 (MLU-Link groups) and Intel Max 1550 (Xe Link). Jobs: 70% one card, 20% half a
// card, 8% eight cards, 2% 32-card gangs (4 nodes x 8).
#include <algorithm>
#include <chrono>
#include <deque>
#include <iostream>
#include <map>
#include <random>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"
#include "drivers/fingerprint/fingerprint.h"
#include "nlohmann/json.hpp"
#include "scheduler/framework/profile.h"
#include "src/common/convert.h"
#include "src/common/flags.h"
#include "src/daemon/state/cluster_state.h"
#include "tests/bench/percentile.h"
#include "tests/testing/memory_store.h"

namespace {

using hetpool::DeviceRecord;
using hetpool::LinkKind;
using hetpool::Vendor;
namespace sched = hetpool::scheduler;

// The default profile, or the one in `file` (read as hetpoold reads its --scheduler-profile).
std::unique_ptr<sched::Framework> FrameworkOf(const std::string& file) {
  if (file.empty()) return sched::DefaultFramework();
  auto text = hetpool::ReadTextFile(file);
  auto framework = text.ok() ? sched::FrameworkFromProfile(*text) : text.status();
  if (!framework.ok()) {
    std::cerr << "sched_throughput: --scheduler-profile " << file << ": " << framework.status() << "\n";
    std::exit(2);
  }
  return *std::move(framework);
}

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
            {devs[static_cast<size_t>(j)].id,
             same_group ? m.fabric : (i / 4 == j / 4 ? LinkKind::kPcieHostBridge : LinkKind::kCrossSocket),
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

// One decision: the job's shape, whether it was placed and how long it took.
struct Decided {
  int shape = kOne;
  bool placed = false;
  double us = 0;
};

// The shape's cards in thousandths (a half card is 500).
int64_t CardMilli(int shape) {
  switch (shape) {
    case kHalf: return 500;
    case kEight: return 8000;
    case kGang: return 32000;
    default: return 1000;
  }
}

sched::PlacementRequest RequestFor(int shape) {
  sched::PlacementRequest req;
  req.nnodes = shape == kGang ? 4 : 1;
  req.devices_per_node = shape == kEight || shape == kGang ? 8 : 1;
  if (shape == kHalf) req.device_milli = 500;
  return req;
}

// `seconds`: the time the scheduler spent (the Place calls, or the Ticks), what the rates divide by.
nlohmann::json Summary(const std::vector<Decided>& decisions, double seconds) {
  std::map<int, std::vector<double>> by_shape;
  std::map<int, int> placed_by_shape;
  std::vector<double> placing_us, refusing_us;
  for (const Decided& d : decisions) {
    by_shape[d.shape].push_back(d.us);
    placed_by_shape[d.shape] += d.placed ? 1 : 0;
    (d.placed ? placing_us : refusing_us).push_back(d.us);
  }
  nlohmann::json by_outcome = nlohmann::json::object();
  for (const auto& [name, lat] :
       {std::pair<const char*, const std::vector<double>&>{"placed", placing_us}, {"refused", refusing_us}}) {
    double total_us = 0;
    for (double us : lat) total_us += us;
    by_outcome[name] = {
        {"decisions", lat.size()},
        {"seconds", total_us / 1e6},
        {"per_second_of_own_time", total_us > 0 ? static_cast<double>(lat.size()) / (total_us / 1e6) : 0},
        {"p50_ms", Percentile(lat, 0.5) / 1000},
        {"p99_ms", Percentile(lat, 0.99) / 1000}};
  }
  nlohmann::json by_shape_json = nlohmann::json::object();
  for (const auto& [shape, lat] : by_shape) {
    std::vector<double> placed_lat;
    for (const Decided& d : decisions) {
      if (d.shape == shape && d.placed) placed_lat.push_back(d.us);
    }
    by_shape_json[kShapeNames[shape]] = {{"decisions", lat.size()},
                                         {"placed", placed_by_shape[shape]},
                                         {"p50_ms", Percentile(lat, 0.5) / 1000},
                                         {"p99_ms", Percentile(lat, 0.99) / 1000},
                                         {"placed_p99_ms", Percentile(placed_lat, 0.99) / 1000}};
  }
  const double placed = static_cast<double>(placing_us.size()), refused = static_cast<double>(refusing_us.size());
  return {{"placements_per_second", seconds > 0 ? placed / seconds : 0},
          {"refusals_per_second", seconds > 0 ? refused / seconds : 0},
          {"placed", placing_us.size()},
          {"refused", refusing_us.size()},
          {"placed_share", placed + refused > 0 ? placed / (placed + refused) : 0},
          {"seconds", seconds},
          {"by_outcome", by_outcome},
          {"shapes", by_shape_json}};
}

// Keeps the pool at or under a share of its cards in use: the oldest jobs finish first.
template <typename Job>
class SteadyPool {
 public:
  SteadyPool(int64_t cards, double utilisation) : ceiling_milli_(static_cast<int64_t>(utilisation * cards * 1000)) {}
  // Ends the oldest jobs (calling `finish` on each) until `milli` more fits under the ceiling.
  // Returns true once the pool has reached the ceiling (the warm-up is over).
  template <typename F>
  bool MakeRoom(int64_t milli, F&& finish) {
    while (!running_.empty() && used_milli_ + milli > ceiling_milli_) {
      reached_ = true;
      finish(running_.front().second);
      used_milli_ -= running_.front().first;
      running_.pop_front();
    }
    return reached_;
  }
  void Started(int64_t milli, Job job) {
    used_milli_ += milli;
    running_.emplace_back(milli, std::move(job));
  }
  bool reached() const { return reached_; }

 private:
  const int64_t ceiling_milli_;
  int64_t used_milli_ = 0;
  bool reached_ = false;
  std::deque<std::pair<int64_t, Job>> running_;
};

// `Place` alone on views the bench owns.
nlohmann::json RunPlace(const std::string& profile, const std::vector<std::vector<DeviceRecord>>& devices,
                        const std::vector<int>& shapes, double utilisation) {
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
  auto framework = FrameworkOf(profile);
  sched::PlacementPolicy& policy = *framework;
  struct Running {
    sched::PlacementRequest request;
    sched::Placement placement;
  };
  SteadyPool<Running> pool(static_cast<int64_t>(devices.size()) * 8, utilisation);
  // A job ends: its cards go back on the views.
  auto finish = [&](const Running& job) {
    for (const auto& a : job.placement.nodes) {
      auto& v = views[index_of.at(a.node)];
      sched::GiveBackOnView(job.request, a, v);
      v.generation = ++generation;
    }
  };
  std::vector<Decided> decisions;
  double seconds = 0;
  int warmup = 0;
  for (int shape : shapes) {
    const bool steady = pool.MakeRoom(CardMilli(shape), finish);
    const sched::PlacementRequest req = RequestFor(shape);
    policy.NoteSubmitted(req);  // the mix Fgd weighs, as hetpoold tells it at submission
    const auto t0 = std::chrono::steady_clock::now();
    auto placement = policy.Place(req, views);
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (steady) {
      decisions.push_back({shape, placement.ok(), us});
      seconds += us / 1e6;
    } else {
      ++warmup;
    }
    if (!placement.ok()) continue;
    for (const auto& a : placement->nodes) {
      auto& v = views[index_of.at(a.node)];
      v.generation = ++generation;
      sched::TakeOnView(req, a, v);
    }
    pool.Started(CardMilli(shape), {req, *std::move(placement)});
  }
  nlohmann::json out = Summary(decisions, seconds);
  out["warmup_decisions"] = warmup;
  return out;
}

// Records each decision of the cycle (ClusterState reports them in queue order), by job.
class DecisionRecorder final : public hetpool::daemon::StateObserver {
 public:
  void Decision(const pb::Job& job, absl::Duration took, bool placed) override {
    auto it = shape_of.find(job.id());
    decisions.push_back({it == shape_of.end() ? kOne : it->second, placed, absl::ToDoubleMicroseconds(took)});
  }
  void StoreWrite(absl::Duration, bool) override {}
  void SchedulingPass(absl::Duration, bool) override {}
  void JobEnded(const pb::Job&) override {}
  void JobRestarted(const hetpool::v1::Job&, const std::string&) override {}
  std::unordered_map<std::string, int> shape_of;
  std::vector<Decided> decisions;
};

[[noreturn]] void Fail(const std::string& what, const absl::Status& status) {
  std::cerr << "sched_throughput: " << what << ": " << status << "\n";
  std::exit(1);
}

// The daemon's scheduling cycle in a steady state: jobs submitted a batch at a time, one Tick
// each, and jobs ended through their nodes' heartbeats.
nlohmann::json RunCycle(const std::string& profile, const std::vector<std::vector<DeviceRecord>>& devices,
                        const std::vector<int>& shapes, double utilisation, int batch) {
  hetpool::testing::MemoryStore store;  // what a store costs minus the disk
  DecisionRecorder recorder;
  auto framework = FrameworkOf(profile);
  hetpool::daemon::ClusterOptions options;
  options.observer = &recorder;
  options.lease_ttl = absl::Hours(1);  // the cycle must not see nodes expire while it runs
  hetpool::daemon::ClusterState state(options, &store, framework.get());
  if (auto s = state.Load(); !s.ok()) Fail("load", s);
  std::vector<std::string> sessions(devices.size());
  for (size_t n = 0; n < devices.size(); ++n) {
    pb::RegisterRequest req;
    req.set_node_name("node-" + std::to_string(n));
    req.set_address("10.0." + std::to_string(n / 250) + "." + std::to_string(n % 250));
    req.set_torchrun_path("/usr/bin/torchrun");
    req.set_work_dir("/var/lib/hetpool");
    hetpool::NodeInventory inventory;
    inventory.devices = devices[n];
    *req.mutable_inventory() = hetpool::ToProto(inventory);
    auto r = state.Register(req);
    if (!r.ok()) Fail("register", r.status());
    sessions[n] = r->session_id();
  }
  // What each node's agent runs (job -> generation): a heartbeat reports all of it.
  std::vector<std::map<std::string, uint64_t>> processes(devices.size());
  auto node_index = [](const std::string& name) { return static_cast<size_t>(std::stoul(name.substr(5))); };
  // A job ends: each of its nodes reports its process exited with code 0.
  auto finish = [&](const pb::Job& job) {
    for (const auto& p : job.placement()) {
      const size_t n = node_index(p.node());
      pb::HeartbeatRequest beat;
      beat.set_session_id(sessions[n]);
      beat.set_node_name(p.node());
      for (const auto& [id, generation] : processes[n]) {
        pb::ProcessStatus* process = beat.add_processes();
        process->set_job_id(id);
        process->set_generation(generation);
        const bool ending = id == job.id();
        process->set_running(!ending);
        process->set_exited(ending);
      }
      if (auto r = state.Heartbeat(beat); !r.ok()) Fail("heartbeat", r.status());
      processes[n].erase(job.id());
    }
  };
  SteadyPool<pb::Job> pool(static_cast<int64_t>(devices.size()) * 8, utilisation);
  std::vector<std::string> waiting;  // submitted, not placed yet
  double seconds = 0;
  size_t counted_from = 0, next = 0;  // decisions before the pool first reached the ceiling: warm-up
  int64_t queued_milli = 0;
  while (next < shapes.size()) {
    // Room under the ceiling for the batch and for what still waits, then the batch.
    const size_t end = std::min(shapes.size(), next + static_cast<size_t>(batch));
    int64_t batch_milli = 0;
    for (size_t j = next; j < end; ++j) batch_milli += CardMilli(shapes[j]);
    const bool was_steady = pool.reached();
    pool.MakeRoom(queued_milli + batch_milli, finish);
    if (!was_steady && pool.reached()) counted_from = recorder.decisions.size();
    for (; next < end; ++next) {
      pb::JobSpec spec;
      spec.set_user("bench");
      spec.set_working_dir("/tmp");
      spec.add_command("/bin/true");
      spec.set_nnodes(shapes[next] == kGang ? 4 : 1);
      spec.set_devices_per_node(shapes[next] == kEight || shapes[next] == kGang ? 8 : 1);
      if (shapes[next] == kHalf) spec.set_device_milli(500);
      auto job = state.Submit(spec, "");
      if (!job.ok()) Fail("submit", job.status());
      recorder.shape_of[job->id()] = shapes[next];
      waiting.push_back(job->id());
    }
    const auto start = std::chrono::steady_clock::now();
    state.Tick();
    if (pool.reached()) seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // What the Tick placed starts running on its nodes.
    std::vector<std::string> still;
    queued_milli = 0;
    for (const std::string& id : waiting) {
      auto job = state.GetJob(id);
      if (!job.ok()) Fail("get job", job.status());
      const int64_t milli = CardMilli(recorder.shape_of[id]);
      if (job->state() == pb::JOB_STATE_PENDING) {
        still.push_back(id);
        queued_milli += milli;
        continue;
      }
      for (const auto& p : job->placement()) processes[node_index(p.node())][id] = job->generation();
      pool.Started(milli, *std::move(job));
    }
    waiting.swap(still);
  }
  std::vector<Decided> counted(recorder.decisions.begin() + static_cast<std::ptrdiff_t>(counted_from),
                               recorder.decisions.end());
  nlohmann::json out = Summary(counted, seconds);
  out["warmup_decisions"] = counted_from;
  out["left_waiting"] = waiting.size();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int nodes_n = 5000, jobs_n = 100000, batch = 1000;
  double utilisation = 0.9;
  uint64_t seed = 1;
  std::string output = "table", mode = "both", profile;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--nodes")
      nodes_n = std::stoi(value);
    else if (flag == "--jobs")
      jobs_n = std::stoi(value);
    else if (flag == "--seed")
      seed = std::stoull(value);
    else if (flag == "--mode")
      mode = value;
    else if (flag == "--utilisation")
      utilisation = std::stod(value);
    else if (flag == "--batch")
      batch = std::stoi(value);
    else if (flag == "--scheduler-profile")
      profile = value;
    else if (flag == "-o")
      output = value;
    else {
      std::cerr << "sched_throughput: unknown flag " << flag << "\n";
      return 2;
    }
  }
  if (mode != "both" && mode != "place" && mode != "cycle") {
    std::cerr << "sched_throughput: --mode is both, place or cycle\n";
    return 2;
  }
  if (!(utilisation > 0 && utilisation <= 1) || batch < 1 || nodes_n < 1 || jobs_n < 1) {
    std::cerr << "sched_throughput: --utilisation is in (0, 1]; --batch, --nodes and --jobs are at least 1\n";
    return 2;
  }
  // The daemon's info lines (one per scheduled job) go to stderr, as hetpoold's do, so that stdout
  // stays the result; run with 2>/dev/null to keep their cost and drop the text.
  spdlog::set_default_logger(spdlog::stderr_logger_mt("sched_throughput"));
  std::mt19937_64 rng(seed);
  const auto devices = MakePool(nodes_n, rng);
  const std::vector<int> shapes = MakeShapes(jobs_n, rng);
  nlohmann::json result = {{"scheduler_profile", profile.empty() ? "default" : profile},
                           {"nodes", nodes_n},
                           {"cards", nodes_n * 8},
                           {"jobs", jobs_n},
                           {"steady_state", absl::StrCat("jobs finish oldest first to keep at most ", utilisation * 100,
                                                         "% of the cards in use; the warm-up is not counted")}};
  if (mode != "cycle") result["place"] = RunPlace(profile, devices, shapes, utilisation);
  if (mode != "place") {
    result["cycle"] = RunCycle(profile, devices, shapes, utilisation, batch);
    result["cycle"]["batch"] = batch;
  }
  if (output == "json") {
    std::cout << result.dump(2) << "\n";
    return 0;
  }
  std::cout << nodes_n << " nodes x 8 cards, " << jobs_n
            << " jobs; steady state: " << result["steady_state"].get<std::string>() << "\n";
  for (const char* part : {"place", "cycle"}) {
    if (!result.contains(part)) continue;
    const auto& r = result[part];
    std::cout << part << ": " << r["placements_per_second"].get<double>() << " placements/s, "
              << r["refusals_per_second"].get<double>() << " refusals/s (" << r["placed"].get<int>() << " placed, "
              << r["refused"].get<int>() << " refused)\n";
    for (const auto& [name, o] : r["by_outcome"].items()) std::cout << "  " << name << ": " << o.dump() << "\n";
    for (const auto& [name, sh] : r["shapes"].items()) std::cout << "  " << name << ": " << sh.dump() << "\n";
  }
  return 0;
}
