// fleet_scale: one real hetpoold (SQLite) against a simulated fleet over real gRPC
// (tests/bench/fleet_sim.h), with a store grown to a quarter million jobs first (issue 19).
// It reports what an operator of a large pool asks: daemon RSS and CPU with heartbeats alone and
// under a stream of submissions, submit-to-running latency, scheduling pass time (the daemon's own
// hetpool_scheduling_pass_seconds), `list` latency for the default page, restart time to the first
// answered call and to the first placement, whether the restart disturbed any running job, and
// the store's size. Figures and commands: docs/benchmarks.md ("Fleet scale").
//
//   build/tests/fleet_scale [--nodes 5000] [--cards 8] [--store-jobs 250000] [--rate 100]
//                           [--load-seconds 60] [--idle-seconds 20]
//                           [--trace ../shared/traces/alibaba-gpu-v2023/csv] [-o json]
//   CI size: --nodes 500 --store-jobs 25000 --load-seconds 10 --idle-seconds 5
//   build/tests/fleet_scale --store-jobs 250000 --seed-only DIR: only seed DIR/hetpool.db, to time
//   or profile hetpoold's start on it alone (hetpoold --data-dir DIR --insecure).
//   build/tests/fleet_scale --ramp 250,500,1000,2000 [--load-seconds 60] [--job-seconds S]: after
//   the heartbeats-alone window, submissions at each rate in turn for --load-seconds, and the
//   highest rate held: every submission acknowledged at the pace asked and ordered to its node
//   with submit-to-order p99 under 1 s (counted from the call, so the acknowledgement is in it).
//   The ramp stops at the first rate not held; there is no restart in this mode.
//
// Job shapes and durations come from the trace's pods when --trace is given (whole cards,
// durations scaled down 100x and kept within 5-120 s so the pool keeps free capacity), else from
// a fixed mix of 1/2/4/8-card jobs of 5-60 s.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "drivers/backend_factory.h"
#include "nlohmann/json.hpp"
#include "scheduler/trace/trace_replay.h"
#include "src/common/convert.h"
#include "src/daemon/store/sqlite_store.h"
#include "tests/bench/fleet_sim.h"
#include "tests/bench/percentile.h"
#include "tests/bench/proc_cpu.h"
#include "tests/testing/cluster_harness.h"
#include "tests/testing/etcd_process.h"
#include "tests/testing/metrics_scrape.h"

namespace {

namespace pb = ::hetpool::v1;
using hetpool::bench::CpuSeconds;
using hetpool::bench::FleetNodes;
using hetpool::bench::FleetOptions;
using hetpool::bench::FleetSimulator;
using hetpool::bench::SimNodeSpec;
using hetpool::bench::TemplateInventory;
using hetpool::testing::TestCluster;

struct Options {
  int nodes = 5000;
  int cards = 8;
  int64_t store_jobs = 250000;
  double rate = 100;
  int load_seconds = 60;
  int idle_seconds = 20;
  std::string trace;
  std::string output = "table";
  std::string seed_only;  // a directory: seed its store and stop
  // --ramp: submission rates (per second), each held for --load-seconds, in place of the one
  // --rate and the restart; the report names the highest rate held (issue 44).
  std::vector<double> ramp;
  double job_seconds = 0;  // ramp: each job's run time; 0 = sized to keep the pool half busy
};

struct Shape {
  int cards = 1;
  double seconds = 10;
};

int Usage(const std::string& why) {
  std::cerr << "fleet_scale: " << why
            << "\nusage: fleet_scale [--nodes N] [--cards N] [--store-jobs N] [--rate PER_S] [--load-seconds S]"
            << " [--seed-only DIR] [--ramp R1,R2,... [--job-seconds S]]"
               " [--idle-seconds S] [--trace DIR] [-o json]\n";
  return 2;
}

// Job shapes: the trace's pods (whole cards, durations scaled down) or a fixed mix.
std::vector<Shape> Shapes(const Options& o) {
  std::vector<Shape> shapes;
  if (!o.trace.empty()) {
    auto pods = hetpool::scheduler::trace::LoadPods(o.trace + "/openb_pod_list_default.csv");
    if (pods.ok()) {
      for (const auto& p : *pods) {
        if (p.num_gpu <= 0 || p.scheduled_time < 0 || p.deletion_time <= p.scheduled_time) continue;
        const double seconds = std::clamp((p.deletion_time - p.scheduled_time) / 100.0, 5.0, 120.0);
        shapes.push_back({std::min(p.num_gpu, o.cards), seconds});
      }
    } else {
      std::cerr << "fleet_scale: " << pods.status() << "; using the fixed mix\n";
    }
  }
  if (shapes.empty()) {
    for (const auto& [cards, seconds] : std::vector<std::pair<int, double>>{
             {1, 5}, {1, 10}, {1, 20}, {1, 30}, {2, 15}, {2, 45}, {4, 30}, {4, 60}, {8, 20}, {8, 60}}) {
      shapes.push_back({std::min(cards, o.cards), seconds});
    }
  }
  return shapes;
}

pb::JobSpec SpecFor(const Shape& shape, int n) {
  pb::JobSpec spec =
      hetpool::bench::SimTrainingSpec(absl::StrCat("fleet-", n), absl::StrCat("user", n % 40), shape.cards);
  for (const char* a : {"--epochs", "3", "--lr", "3e-4"}) spec.mutable_python()->add_args(a);
  (*spec.mutable_env())["FLEET_SIM_DURATION_S"] = absl::StrFormat("%.1f", shape.seconds);
  (*spec.mutable_env())["WANDB_PROJECT"] = "fleet";
  return spec;
}

// A finished job as the daemon stores one: spec, placement, launch plan, events, times.
pb::Job FinishedJob(int64_t seq, const Shape& shape, absl::Time at) {
  pb::Job job;
  job.set_id(absl::StrFormat("job-%06d", seq));
  job.set_submit_seq(static_cast<uint64_t>(seq));
  *job.mutable_spec() = SpecFor(shape, static_cast<int>(seq));
  job.set_state(pb::JOB_STATE_SUCCEEDED);
  job.set_message("every node exited with code 0");
  job.set_generation(1);
  *job.mutable_created_at() = hetpool::ToProtoTime(at);
  *job.mutable_scheduled_at() = hetpool::ToProtoTime(at + absl::Seconds(1));
  *job.mutable_started_at() = hetpool::ToProtoTime(at + absl::Seconds(2));
  *job.mutable_finished_at() = hetpool::ToProtoTime(at + absl::Seconds(2 + shape.seconds));
  const std::string node = absl::StrFormat("sim-%05d", seq % 5000);
  pb::NodePlacement* placement = job.add_placement();
  placement->set_node(node);
  for (int c = 0; c < shape.cards; ++c) placement->add_device_ids(absl::StrCat("nvidia", c));
  placement->set_exited(true);
  pb::NodeLaunchPlan* plan = job.add_launch_plan();
  plan->set_node(node);
  plan->set_script("train.py");
  for (const char* a : {"torchrun", "--nnodes", "1", "--nproc-per-node", "1", "--rdzv-backend", "c10d", "train.py",
                        "--epochs", "3", "--lr", "3e-4"}) {
    plan->add_argv(a);
  }
  for (const char* k : {"CUDA_VISIBLE_DEVICES", "NCCL_SOCKET_IFNAME", "HETPOOL_JOB_ID", "HETPOOL_GENERATION",
                        "MASTER_ADDR", "OMP_NUM_THREADS", "WANDB_PROJECT"}) {
    (*plan->mutable_env())[k] = "0,1,2,3";
  }
  plan->set_dist_backend("nccl");
  plan->set_torch_device("cuda");
  plan->set_procs(shape.cards);
  for (pb::JobState s :
       {pb::JOB_STATE_PENDING, pb::JOB_STATE_SCHEDULED, pb::JOB_STATE_RUNNING, pb::JOB_STATE_SUCCEEDED}) {
    pb::JobEvent* e = job.add_events();
    e->set_state(s);
    *e->mutable_time() = hetpool::ToProtoTime(at);
  }
  return job;
}

// The store of a pool that has run for 90 days with hetpoold's default retention (30 days):
// `count` finished jobs ending evenly over those days, the older two thirds moved to the archive
// by the store's own ArchiveJobs, as the daemon's retention sweep leaves them. (Seeded all live,
// the first start would spend its measured minutes archiving them.) Returns the live count.
absl::StatusOr<int64_t> SeedStore(const std::string& path, int64_t count, const std::vector<Shape>& shapes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  auto store = hetpool::daemon::SqliteStore::Open(path);
  if (!store.ok()) return store.status();
  const absl::Duration history = absl::Hours(24 * 90);
  const absl::Duration retention = absl::Hours(24 * 30);  // hetpoold --retain-finished's default
  const absl::Time now = absl::Now();
  const absl::Duration step = count > 0 ? history / count : absl::ZeroDuration();
  int64_t live = 0;
  std::vector<pb::Job> batch;
  std::vector<pb::Job> archived;
  for (int64_t seq = 1; seq <= count; ++seq) {
    pb::Job job = FinishedJob(seq, shapes[seq % shapes.size()], now - history + step * (seq - 1));
    if (hetpool::FromProtoTime(job.finished_at()) < now - retention) {
      archived.push_back(job);
    } else {
      ++live;
    }
    batch.push_back(std::move(job));
    if (batch.size() == 5000 || seq == count) {
      if (auto s = (*store)->PutAll(batch, {}); !s.ok()) return s;
      if (auto s = (*store)->ArchiveJobs(archived, /*keep=*/true); !s.ok()) return s;
      batch.clear();
      archived.clear();
    }
  }
  return live;
}

// Its resident set in bytes.
double RssBytes(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) * 1024;
  }
  return 0;
}

double FileBytes(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? static_cast<double>(st.st_size) : 0;
}

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

// The daemon's own figures for loading its store, from the last "loaded ... in X s (Y s reading
// it: nodes A s, job rows B s, decoding them C s)" line of its log: the whole load, the part
// before the state lock (reading and decoding the rows) and that part's three steps; -1 for a
// figure the line does not have.
nlohmann::json LoadSeconds(const std::string& log) {
  nlohmann::json out = {{"all", -1.0}, {"reading", -1.0}, {"nodes", -1.0}, {"job_rows", -1.0}, {"decoding", -1.0}};
  const size_t start = log.rfind("from the store in ");
  if (start == std::string::npos) return out;
  const std::string line = log.substr(start, log.find('\n', start) - start);
  for (const auto& [key, label] : std::vector<std::pair<const char*, const char*>>{{"all", "from the store in "},
                                                                                   {"reading", "s ("},
                                                                                   {"nodes", "nodes "},
                                                                                   {"job_rows", "job rows "},
                                                                                   {"decoding", "decoding them "}}) {
    const size_t at = line.find(label);
    if (at != std::string::npos) out[key] = std::atof(line.c_str() + at + std::strlen(label));
  }
  return out;
}

// When the daemon logged the last line holding `needle` (its log's local-time stamp), or
// InfiniteFuture when it has no such line.
absl::Time LoggedAt(const std::string& log, const std::string& needle) {
  const size_t found = log.rfind(needle);
  if (found == std::string::npos) return absl::InfiniteFuture();
  const size_t line = log.rfind('\n', found);
  const size_t start = line == std::string::npos ? 0 : line + 1;
  absl::Time at;
  std::string error;
  if (!absl::ParseTime("%Y-%m-%dT%H:%M:%E3S", log.substr(start, 23), absl::LocalTimeZone(), &at, &error)) {
    return absl::InfiniteFuture();
  }
  return at;
}

// Each submitted job's wait to its launch order and to the heartbeat that reported it running
// (first generation only; a job not ordered yet is not in either, one not running not in the second).
struct Waits {
  std::vector<double> to_order_ms, to_running_ms;
};
Waits WaitsOf(const std::vector<hetpool::bench::LaunchRecord>& launches,
              const std::map<std::string, absl::Time>& submitted) {
  Waits w;
  for (const auto& l : launches) {
    auto it = submitted.find(l.job_id);
    if (it == submitted.end() || l.generation != 1) continue;
    w.to_order_ms.push_back(absl::ToDoubleMilliseconds(l.ordered - it->second));
    if (l.reported_running != absl::InfiniteFuture()) {
      w.to_running_ms.push_back(absl::ToDoubleMilliseconds(l.reported_running - it->second));
    }
  }
  return w;
}

// One step of the ramp: `rate` submissions/s for `seconds`, then until every one is ordered to
// its node (or 30 s more). Submissions come from many users at once, as from CI pipelines: one
// client per 10/s, each with 100 ms per call at its share of the pace (a durable submission
// waits for its group's fsync), so a slow answer delays that client's next call, not the
// stream. `next_job` numbers the jobs.
nlohmann::json RampStep(double rate, int seconds, double job_seconds, const std::vector<Shape>& shapes,
                        TestCluster& cluster, FleetSimulator& fleet, pid_t daemon, int& next_job) {
  const int clients_n = std::clamp(static_cast<int>(std::ceil(rate / 10)), 8, 256);
  const int total = static_cast<int>(rate * seconds);
  const int first = next_job;
  next_job += total;
  struct Sent {
    std::string id;
    absl::Time at;  // when the call was made: the user's wait starts there
  };
  std::vector<std::vector<Sent>> sent(clients_n);
  std::atomic<int> failed{0};
  const double cpu0 = CpuSeconds(daemon);
  const absl::Time t0 = absl::Now();
  std::vector<std::thread> clients;
  for (int c = 0; c < clients_n; ++c) {
    clients.emplace_back([&, c] {
      auto stub = pb::JobService::NewStub(cluster.channel());
      for (int n = c; n < total; n += clients_n) {
        const absl::Time due = t0 + absl::Seconds(n / rate);
        if (absl::Now() < due) absl::SleepFor(due - absl::Now());
        pb::SubmitJobRequest req;
        *req.mutable_spec() = SpecFor({shapes[(n * 7919) % shapes.size()].cards, job_seconds}, first + n);
        pb::SubmitJobResponse resp;
        grpc::ClientContext ctx;
        ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
        const absl::Time at = absl::Now();
        const grpc::Status status = stub->SubmitJob(&ctx, req, &resp);
        if (status.ok()) {
          sent[c].push_back({resp.job().id(), at});
        } else if (failed.fetch_add(1) == 0) {
          std::cerr << "fleet_scale: a submission failed: " << status.error_message() << "\n";
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  const double wall = Seconds(absl::Now() - t0);
  const double cpu = (CpuSeconds(daemon) - cpu0) / wall;
  std::map<std::string, absl::Time> submitted;
  for (const auto& client : sent) {
    for (const Sent& s : client) submitted[s.id] = s.at;
  }
  Waits waits;
  for (absl::Time deadline = absl::Now() + absl::Seconds(30);;) {
    waits = WaitsOf(fleet.Launches(), submitted);
    if (waits.to_order_ms.size() >= submitted.size() || absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(200));
  }
  const std::vector<double>& to_order_ms = waits.to_order_ms;
  const std::vector<double>& to_running_ms = waits.to_running_ms;
  const double achieved = static_cast<double>(submitted.size()) / wall;
  const double order_p99 = hetpool::bench::Percentile(to_order_ms, 0.99);
  const bool all_ordered = to_order_ms.size() == submitted.size();
  const bool held = failed.load() == 0 && achieved >= 0.98 * rate && all_ordered && order_p99 < 1000;
  return {{"rate_per_s", rate},
          {"achieved_rate_per_s", achieved},
          {"clients", clients_n},
          {"job_seconds", job_seconds},
          {"submitted", submitted.size()},
          {"failed_submits", failed.load()},
          {"ordered", to_order_ms.size()},
          {"daemon_cpu_cores", cpu},
          {"submit_to_order_ms",
           {{"p50", hetpool::bench::Percentile(to_order_ms, 0.5)},
            {"p99", order_p99},
            {"max", hetpool::bench::Percentile(to_order_ms, 1.0)}}},
          {"submit_to_running_ms",
           {{"p50", hetpool::bench::Percentile(to_running_ms, 0.5)},
            {"p99", hetpool::bench::Percentile(to_running_ms, 0.99)}}},
          {"held", held}};
}

// The ramp: each rate in turn until one is not held. A job runs `o.job_seconds`, or long enough
// that the step's rate keeps about half the pool's cards busy (the run's subject is the daemon's
// pace, not a full pool's queue), within 1-120 s.
nlohmann::json RunRamp(const Options& o, const std::vector<Shape>& shapes, TestCluster& cluster, FleetSimulator& fleet,
                       pid_t daemon, int& next_job) {
  double mean_cards = 0;
  for (const Shape& s : shapes) mean_cards += s.cards;
  mean_cards /= static_cast<double>(shapes.size());
  nlohmann::json steps = nlohmann::json::array();
  double highest = 0;
  for (const double rate : o.ramp) {
    const double job_seconds =
        o.job_seconds > 0 ? o.job_seconds : std::clamp(0.5 * o.nodes * o.cards / (rate * mean_cards), 1.0, 120.0);
    if (o.output != "json") {
      std::cerr << absl::FormatTime("%H:%M:%S ", absl::Now(), absl::LocalTimeZone()) << "ramp: " << rate
                << " submissions/s for " << o.load_seconds << " s (jobs of " << job_seconds << " s)\n";
    }
    nlohmann::json step = RampStep(rate, o.load_seconds, job_seconds, shapes, cluster, fleet, daemon, next_job);
    const bool held = step["held"].get<bool>();
    steps.push_back(std::move(step));
    if (!held) break;
    highest = rate;
  }
  return {{"steps", steps}, {"highest_rate_held_per_s", highest}};
}

}  // namespace

int main(int argc, char** argv) {
  // Thousands of simulated nodes each take their own mutex every few milliseconds: Debian's
  // Abseil would spend most of the simulator's CPU in its deadlock detector (hetpoold turns it
  // off for the same reason), and the simulator shares the machine with the daemon it measures.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return Usage("missing value for " + flag);
    const std::string value = argv[++i];
    if (flag == "--nodes")
      o.nodes = std::stoi(value);
    else if (flag == "--cards")
      o.cards = std::stoi(value);
    else if (flag == "--store-jobs")
      o.store_jobs = std::stoll(value);
    else if (flag == "--rate")
      o.rate = std::stod(value);
    else if (flag == "--load-seconds")
      o.load_seconds = std::stoi(value);
    else if (flag == "--idle-seconds")
      o.idle_seconds = std::stoi(value);
    else if (flag == "--trace")
      o.trace = value;
    else if (flag == "-o")
      o.output = value;
    else if (flag == "--seed-only")
      o.seed_only = value;
    else if (flag == "--job-seconds")
      o.job_seconds = std::stod(value);
    else if (flag == "--ramp") {
      for (absl::string_view r : absl::StrSplit(value, ',')) {
        double rate = 0;
        if (!absl::SimpleAtod(r, &rate) || rate <= 0) return Usage(absl::StrCat("bad --ramp rate '", r, "'"));
        o.ramp.push_back(rate);
      }
    } else
      return Usage("unknown flag " + flag);
  }
  if (o.nodes < 1 || o.cards < 1 || o.cards > 64 || o.rate <= 0 || o.store_jobs < 0) return Usage("bad sizes");
  nlohmann::json report = {{"nodes", o.nodes},
                           {"cards_per_node", o.cards},
                           {"store_jobs", o.store_jobs},
                           {"rate_per_s", o.rate},
                           {"load_seconds", o.load_seconds}};
  auto say = [&](const std::string& line) {
    if (o.output != "json")
      std::cerr << absl::FormatTime("%H:%M:%S ", absl::Now(), absl::LocalTimeZone()) << line << "\n";
  };

  if (!o.seed_only.empty()) {  // a store to time or profile hetpoold's start on, alone
    const std::string path = o.seed_only + "/hetpool.db";
    auto live = SeedStore(path, o.store_jobs, Shapes(o));
    auto inventory = TemplateInventory(o.cards, o.seed_only);
    absl::Status nodes = inventory.status();
    if (live.ok() && inventory.ok()) {  // the fleet's nodes as their registrations store them
      std::vector<pb::Node> records;
      for (const SimNodeSpec& spec : FleetNodes(*inventory, o.nodes)) {
        pb::Node& node = records.emplace_back();
        node.set_name(spec.name);
        node.set_address("127.0.0.1");
        node.set_state(pb::NODE_STATE_READY);
        *node.mutable_inventory() = spec.inventory;
        node.set_torchrun_path("/usr/bin/torchrun");
        node.set_work_dir("/var/lib/hetpool-agent");
      }
      auto store = hetpool::daemon::SqliteStore::Open(path);
      nodes = store.ok() ? (*store)->PutAll({}, records) : store.status();
    }
    if (!live.ok() || !nodes.ok()) {
      std::cerr << "fleet_scale: seeding the store: " << (live.ok() ? nodes : live.status()) << "\n";
      return 1;
    }
    std::cout << "seeded " << path << ": " << *live << " live jobs of " << o.store_jobs << ", " << o.nodes
              << " nodes; start hetpoold --data-dir " << o.seed_only << " --insecure --listen 127.0.0.1:0\n";
    return 0;
  }
  TestCluster::Options options;
  options.orphan_grace = absl::Minutes(10);  // the product's default: jobs ride out a restart
  options.lease_ttl = absl::Seconds(15);     // likewise (the harness's tests use 10 s)
  const int metrics_port = hetpool::testing::FreeTcpPort();
  options.daemon_args = {"--metrics-listen", absl::StrCat("127.0.0.1:", metrics_port)};
  TestCluster cluster(options);
  const std::vector<Shape> shapes = Shapes(o);

  const std::string db = cluster.dir() + "/daemon/hetpool.db";
  say(absl::StrCat("seeding the store with ", o.store_jobs, " finished jobs"));
  auto live_jobs = SeedStore(db, o.store_jobs, shapes);
  if (!live_jobs.ok()) {
    std::cerr << "fleet_scale: seeding the store: " << live_jobs.status() << "\n";
    return 1;
  }
  report["store_live_jobs"] = *live_jobs;
  absl::Time t0 = absl::Now();
  if (auto s = cluster.StartDaemon(0, absl::Minutes(5)); !s.ok()) {
    std::cerr << "fleet_scale: " << s << "\n";
    return 1;
  }
  report["cold_start_to_first_answer_s"] = Seconds(absl::Now() - t0);
  const pid_t daemon = cluster.daemon_pid();

  auto inventory = TemplateInventory(o.cards, cluster.dir());
  if (!inventory.ok()) {
    std::cerr << "fleet_scale: " << inventory.status() << "\n";
    return 1;
  }
  FleetOptions fleet_options;
  fleet_options.daemon = cluster.address();
  FleetSimulator fleet(fleet_options, FleetNodes(*inventory, o.nodes));
  say(absl::StrCat("registering ", o.nodes, " simulated nodes"));
  t0 = absl::Now();
  if (auto s = fleet.Start(absl::Minutes(5)); !s.ok()) {
    std::cerr << "fleet_scale: " << s << "\n";
    return 1;
  }
  report["register_all_s"] = Seconds(absl::Now() - t0);

  // Heartbeats alone.
  say(absl::StrCat("heartbeats alone for ", o.idle_seconds, " s"));
  double cpu0 = CpuSeconds(daemon);
  const int idle_heartbeats0 = fleet.Heartbeats();
  absl::SleepFor(absl::Seconds(o.idle_seconds));
  report["idle_cpu_cores"] = (CpuSeconds(daemon) - cpu0) / o.idle_seconds;
  // What the daemon's --max-heartbeats-per-second left of the fleet's beats (nodes that
  // registered while the fleet was small learn the spread-out period from their next answer).
  report["idle_heartbeats_per_s"] = static_cast<double>(fleet.Heartbeats() - idle_heartbeats0) / o.idle_seconds;
  report["idle_rss_mib"] = RssBytes(daemon) / (1 << 20);
  report["heartbeats_per_s"] = 0.0;

  if (!o.ramp.empty()) {
    int next_job = 0;
    report["ramp"] = RunRamp(o, shapes, cluster, fleet, daemon, next_job);
    report["failed_agent_calls"] = fleet.FailedCalls();
    fleet.Stop();
    if (o.output == "json") {
      std::cout << report.dump(2) << "\n";
    } else {
      for (const auto& [key, value] : report.items()) {
        if (key != "ramp") std::cout << absl::StrFormat("%-32s %s\n", key, value.dump());
      }
      std::cout << "rate/s  achieved/s  submitted  failed  ordered  to order p50/p99 ms  to running p50/p99 ms"
                   "  daemon cores  held\n";
      for (const auto& step : report["ramp"]["steps"]) {
        std::cout << absl::StrFormat(
            "%6.0f  %10.1f  %9d  %6d  %7d  %8.1f / %-8.1f  %9.1f / %-9.1f  %12.2f  %s\n",
            step["rate_per_s"].get<double>(), step["achieved_rate_per_s"].get<double>(), step["submitted"].get<int>(),
            step["failed_submits"].get<int>(), step["ordered"].get<int>(),
            step["submit_to_order_ms"]["p50"].get<double>(), step["submit_to_order_ms"]["p99"].get<double>(),
            step["submit_to_running_ms"]["p50"].get<double>(), step["submit_to_running_ms"]["p99"].get<double>(),
            step["daemon_cpu_cores"].get<double>(), step["held"].get<bool>() ? "yes" : "no");
      }
      std::cout << "highest rate held: " << report["ramp"]["highest_rate_held_per_s"].dump() << "/s\n";
    }
    // Whatever the pace, the first step's submissions must all be acknowledged and ordered.
    const nlohmann::json& first = report["ramp"]["steps"][0];
    const bool healthy = first["failed_submits"] == 0 && first["ordered"] == first["submitted"];
    if (!healthy) std::cerr << "fleet_scale: submissions of the first step failed or were never ordered\n";
    return healthy ? 0 : 1;
  }

  // Under load: submissions at --rate, `list` pages read beside them.
  say(absl::StrCat("submitting ", o.rate, " jobs/s for ", o.load_seconds, " s"));
  std::map<std::string, absl::Time> submitted;
  std::vector<double> list_ms;
  std::atomic<bool> load_done{false};
  std::thread lister([&] {
    auto stub = pb::JobService::NewStub(cluster.channel());
    while (!load_done.load()) {
      pb::ListJobsRequest req;
      req.set_page_size(50);
      req.set_newest_first(true);
      pb::ListJobsResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
      const absl::Time start = absl::Now();
      if (stub->ListJobs(&ctx, req, &resp).ok()) list_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
      absl::SleepFor(absl::Milliseconds(100));
    }
  });
  const int heartbeats0 = fleet.Heartbeats();
  cpu0 = CpuSeconds(daemon);
  t0 = absl::Now();
  // Several clients, each on its share of the schedule: a slow answer delays one client's
  // next submission, not the whole stream.
  constexpr int kClients = 8;
  std::atomic<int> failed_submits{0};
  absl::Mutex submitted_mu;
  const int total = static_cast<int>(o.rate * o.load_seconds);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto stub = pb::JobService::NewStub(cluster.channel());
      for (int n = c; n < total; n += kClients) {
        const absl::Time due = t0 + absl::Seconds(n / o.rate);
        if (absl::Now() < due) absl::SleepFor(due - absl::Now());
        pb::SubmitJobRequest req;
        *req.mutable_spec() = SpecFor(shapes[(n * 7919) % shapes.size()], n);
        pb::SubmitJobResponse resp;
        grpc::ClientContext ctx;
        ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
        const grpc::Status status = stub->SubmitJob(&ctx, req, &resp);
        if (status.ok()) {
          absl::MutexLock lock(&submitted_mu);
          submitted[resp.job().id()] = absl::Now();
        } else if (failed_submits.fetch_add(1) == 0) {
          std::cerr << "fleet_scale: a submission failed: " << status.error_message() << "\n";
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  const double load_wall = Seconds(absl::Now() - t0);
  report["load_cpu_cores"] = (CpuSeconds(daemon) - cpu0) / load_wall;
  report["heartbeats_per_s"] = (fleet.Heartbeats() - heartbeats0) / load_wall;
  report["load_rss_mib"] = RssBytes(daemon) / (1 << 20);
  report["failed_submits"] = failed_submits.load();
  report["achieved_rate_per_s"] = submitted.size() / load_wall;
  // Wait for the last submissions to start (or 30 s).
  for (absl::Time deadline = absl::Now() + absl::Seconds(30); absl::Now() < deadline;) {
    size_t started = 0;
    for (const auto& l : fleet.Launches())
      started += submitted.contains(l.job_id) && l.reported_running != absl::InfiniteFuture();
    if (started >= submitted.size()) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  load_done.store(true);
  lister.join();
  const Waits waits = WaitsOf(fleet.Launches(), submitted);
  const std::vector<double>& to_order_ms = waits.to_order_ms;
  const std::vector<double>& to_running_ms = waits.to_running_ms;
  report["jobs_started"] = to_running_ms.size();
  report["launch_orders_seen"] = fleet.Launches().size();
  report["failed_agent_calls"] = fleet.FailedCalls();
  if (to_running_ms.size() < submitted.size()) {
    const std::string log = cluster.DaemonLog();
    std::cerr << "fleet_scale: " << submitted.size() - to_running_ms.size() << " jobs did not start; daemon log:\n"
              << log.substr(log.size() > 4000 ? log.size() - 4000 : 0) << "\n";
  }
  report["submit_to_order_ms"] = {{"p50", hetpool::bench::Percentile(to_order_ms, 0.5)},
                                  {"p99", hetpool::bench::Percentile(to_order_ms, 0.99)}};
  report["submit_to_running_ms"] = {{"p50", hetpool::bench::Percentile(to_running_ms, 0.5)},
                                    {"p99", hetpool::bench::Percentile(to_running_ms, 0.99)}};
  report["list_default_page_ms"] = {{"p50", hetpool::bench::Percentile(list_ms, 0.5)},
                                    {"p99", hetpool::bench::Percentile(list_ms, 0.99)},
                                    {"calls", list_ms.size()}};
  const std::string metrics = hetpool::testing::Scrape(metrics_port);
  const std::string pass = "hetpool_scheduling_pass_seconds";
  report["pass_full_ms"] = {{"p50", 1000 * hetpool::testing::HistogramQuantile(metrics, pass, "kind=\"full\"", 0.5)},
                            {"p99", 1000 * hetpool::testing::HistogramQuantile(metrics, pass, "kind=\"full\"", 0.99)}};
  // The same page as the daemon timed it (handler start to answer): the rest of the client's
  // figure is gRPC's queue and the wait for a core.
  const std::string calls = "hetpool_api_call_seconds";
  report["list_in_daemon_ms"] = {
      {"p50", 1000 * hetpool::testing::HistogramQuantile(metrics, calls, "code=\"OK\",method=\"ListJobs\"", 0.5)},
      {"p99", 1000 * hetpool::testing::HistogramQuantile(metrics, calls, "code=\"OK\",method=\"ListJobs\"", 0.99)}};
  report["heartbeat_in_daemon_ms"] = {
      {"p50", 1000 * hetpool::testing::HistogramQuantile(metrics, calls, "code=\"OK\",method=\"Heartbeat\"", 0.5)},
      {"p99", 1000 * hetpool::testing::HistogramQuantile(metrics, calls, "code=\"OK\",method=\"Heartbeat\"", 0.99)}};
  const std::string writes = "hetpool_store_write_seconds";
  report["store_write_ms"] = {{"p50", 1000 * hetpool::testing::HistogramQuantile(metrics, writes, "", 0.5)},
                              {"p99", 1000 * hetpool::testing::HistogramQuantile(metrics, writes, "", 0.99)},
                              {"count", hetpool::testing::Sample(metrics, writes + "_count")}};
  report["pass_new_ms"] = {{"p50", 1000 * hetpool::testing::HistogramQuantile(metrics, pass, "kind=\"new\"", 0.5)},
                           {"p99", 1000 * hetpool::testing::HistogramQuantile(metrics, pass, "kind=\"new\"", 0.99)}};

  // Restart: kill -9, start again on the same port; the fleet keeps its processes running.
  const int running_before = fleet.RunningProcesses();
  const int kills_before = fleet.Kills();
  const size_t launches_before = fleet.Launches().size();
  say(absl::StrCat("restarting hetpoold (kill -9) with ", running_before, " jobs running"));
  const int port = cluster.port();
  cluster.KillDaemon(SIGKILL);
  t0 = absl::Now();
  const double fleet_cpu0 = CpuSeconds(getpid());
  if (auto s = cluster.StartDaemon(port, absl::Minutes(5)); !s.ok()) {
    std::cerr << "fleet_scale: restart: " << s << "\n";
    return 1;
  }
  report["restart_to_first_answer_s"] = Seconds(absl::Now() - t0);
  // The simulated fleet (this process) shares the daemon's cores while it starts: what it took.
  report["restart_fleet_cpu_cores"] = (CpuSeconds(getpid()) - fleet_cpu0) / Seconds(absl::Now() - t0);
  const std::string restart_log = cluster.DaemonLog();
  report["restart_load_s"] = LoadSeconds(restart_log);
  // Where the time before the first answer went: the process starting and opening the store
  // (checked), the load, then the wait until the first call was answered.
  const absl::Time opened = LoggedAt(restart_log, "opened and checked");
  const absl::Time listening = LoggedAt(restart_log, "listening on port");
  report["restart_to_store_opened_s"] = opened == absl::InfiniteFuture() ? -1.0 : Seconds(opened - t0);
  report["restart_to_listening_s"] = listening == absl::InfiniteFuture() ? -1.0 : Seconds(listening - t0);
  auto probe = cluster.Submit(SpecFor({1, 5}, total + 1));
  double first_placement = -1;
  for (absl::Time deadline = absl::Now() + absl::Seconds(60); probe.ok() && absl::Now() < deadline;) {
    for (const auto& l : fleet.Launches()) {
      if (l.job_id == probe->id()) first_placement = Seconds(l.ordered - t0);
    }
    if (first_placement >= 0) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  report["restart_to_first_placement_s"] = first_placement;
  // Every node registers again (its next heartbeat finds the session gone); then two more
  // heartbeat intervals, so any order the restarted daemon gives the re-adopted jobs arrives.
  for (absl::Time deadline = absl::Now() + absl::Seconds(60);
       fleet.Reregistrations() < o.nodes && absl::Now() < deadline;) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  report["restart_to_all_registered_s"] = Seconds(absl::Now() - t0);
  absl::SleepFor(absl::Seconds(4));
  // Disturbed: killed, or launched again under a new generation, because of the restart.
  int relaunched = 0;
  const auto after = fleet.Launches();
  for (size_t i = launches_before; i < after.size(); ++i) relaunched += after[i].generation > 1 ? 1 : 0;
  report["restart_kills"] = fleet.Kills() - kills_before;
  report["restart_relaunches"] = relaunched;
  const int fleet_reregistered = fleet.Reregistrations();
  report["reregistrations"] = fleet_reregistered;
  report["restarted_rss_mib"] = RssBytes(cluster.daemon_pid()) / (1 << 20);
  report["store_mib"] = (FileBytes(db) + FileBytes(db + "-wal")) / (1 << 20);
  fleet.Stop();

  if (o.output == "json") {
    std::cout << report.dump(2) << "\n";
  } else {
    for (const auto& [key, value] : report.items()) std::cout << absl::StrFormat("%-32s %s\n", key, value.dump());
  }
  const bool healthy = failed_submits.load() == 0 && to_running_ms.size() == submitted.size() && first_placement >= 0 &&
                       report["restart_kills"] == 0 && relaunched == 0 && fleet_reregistered >= o.nodes;
  if (!healthy) std::cerr << "fleet_scale: some submissions failed, did not start, or the restart disturbed jobs\n";
  return healthy ? 0 : 1;
}
