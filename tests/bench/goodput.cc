// goodput: what card faults cost a pool, with hetpool's quarantine on and off (issue 61). One real
// hetpoold against a simulated fleet (tests/bench/fleet_sim.h) of 8-card nodes kept busy with
// 1/2/4/8-card jobs. Cards fail at Llama 3's published rate: of its 419 unexpected interruptions
// in 54 days on 16,384 H100s, 78% were hardware, so 2.0% of the cards failed in the run; here the
// run stands for those 54 days, so each card fails with probability 2.0% x --fault-scale, at a
// uniformly drawn moment. A failed card stays failed (a faulty GPU or its HBM, the causes of 47% of
// the interruptions): the job on it dies at that moment, and every later job placed on it dies
// within --fail-after seconds, each printing CUDA's "uncorrectable ECC error encountered", as a
// real one does. Jobs save a checkpoint every --checkpoint seconds and resume from their last
// save: a failure loses the work since.
//
// Reported per mode: goodput (useful card-seconds over allocated: the work that reached a
// checkpoint or the job's end, over the card time held), generations failed by hardware, how many
// landed on a card that had already failed (black-hole hits), jobs lost (ended FAILED), cards
// quarantined (and how many of them never failed), nodes quarantined. Modes: "on" (the defaults, 2 failures of distinct
// jobs within an hour) and "off"
// (--quarantine-after 0: failures still requeue each job away from its own bad cards).
//
//   build/tests/goodput [--nodes 32] [--seconds 180] [--fault-scale 4] [--checkpoint 10]
//                       [--fail-after 2] [--seed 1] [--modes on,off] [-o json]
// Figures and the command: docs/benchmarks.md ("Goodput under card faults").
#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "tests/bench/fleet_sim.h"
#include "tests/testing/cluster_harness.h"

namespace {

namespace pb = ::hetpool::v1;
using hetpool::bench::FleetOptions;
using hetpool::bench::FleetSimulator;
using hetpool::bench::LaunchFate;
using hetpool::testing::TestCluster;

// Llama 3 (Meta, "The Llama 3 Herd of Models", 2024, table 5): 419 unexpected interruptions in 54
// days on 16,384 H100s, 78% of them confirmed or suspected hardware.
constexpr double kLlama3HardwareFailuresPerCard = 419 * 0.78 / 16384;
constexpr char kEccLine[] = "RuntimeError: CUDA error: uncorrectable ECC error encountered";

struct Options {
  int nodes = 32, cards = 8;
  double seconds = 180, fault_scale = 4, checkpoint = 10, fail_after = 2;
  uint32_t seed = 1;
  std::vector<std::string> modes = {"on", "off"};
  std::string output;
};

struct JobPlan {
  int cards = 1;
  double work = 0;  // seconds of work to its end
};

// The run's faults and jobs, the same for every mode (drawn from the seed).
struct Scenario {
  std::map<std::pair<std::string, std::string>, double> fails_at;  // (node, card) -> seconds into the run
  std::vector<JobPlan> jobs;
};

Scenario Draw(const Options& o) {
  Scenario s;
  std::mt19937 rng(o.seed);
  std::uniform_real_distribution<double> unit(0, 1);
  const double p = std::min(1.0, kLlama3HardwareFailuresPerCard * o.fault_scale);
  for (int n = 0; n < o.nodes; ++n) {
    for (int c = 0; c < o.cards; ++c) {
      if (unit(rng) < p)
        s.fails_at[{absl::StrFormat("sim-%05d", n), absl::StrCat("nvidia", c)}] = unit(rng) * o.seconds;
    }
  }
  // Enough work to keep every card busy for the whole run and then some.
  const int shapes[] = {1, 1, 1, 2, 2, 4, 4, 8};
  double demand = 0;
  while (demand < 1.3 * o.nodes * o.cards * o.seconds) {
    JobPlan j{std::min(o.cards, shapes[rng() % 8]), 20 + unit(rng) * 60};
    demand += j.cards * j.work;
    s.jobs.push_back(j);
  }
  return s;
}

// What the simulated jobs did, kept by the fate hook (under its own lock).
struct Ledger {
  absl::Mutex mu;
  absl::Time start;
  std::map<std::string, size_t> plan_of;  // job id -> its plan in the scenario
  std::map<std::string, double> saved;    // job id -> seconds of its work checkpointed or done
  struct Generation {
    int cards = 0;
    double from = 0, to = 0;  // seconds into the run
    double useful = 0;        // seconds of work it kept (saved by a checkpoint or its end)
    bool hardware = false, black_hole = false;
  };
  std::vector<Generation> generations;
};

LaunchFate Fate(const Options& o, const Scenario& scenario, Ledger& ledger, const std::string& node,
                const pb::LaunchOrder& launch, absl::Time now) {
  absl::MutexLock lock(&ledger.mu);
  const double t = absl::ToDoubleSeconds(now - ledger.start);
  auto known = ledger.plan_of.find(launch.job_id());
  const JobPlan plan = known != ledger.plan_of.end() ? scenario.jobs[known->second] : JobPlan{1, 10};
  double& saved = ledger.saved[launch.job_id()];
  const double remaining = std::max(0.0, plan.work - saved);
  double fails = INFINITY;
  int failing_rank = 0;  // local rank i runs on the i-th card
  bool already_bad = false;
  for (int i = 0; i < launch.device_ids_size(); ++i) {
    auto it = scenario.fails_at.find({node, launch.device_ids(i)});
    if (it == scenario.fails_at.end()) continue;
    already_bad = already_bad || it->second <= t;
    const double at = std::max(it->second, t + o.fail_after);  // a bad card fails the job as it starts
    if (at < fails) fails = at, failing_rank = i;
  }
  Ledger::Generation g{launch.device_ids_size(), t, t + remaining, remaining, false, already_bad};
  LaunchFate fate;
  if (fails < t + remaining) {
    const double ran = fails - t;
    g.to = fails;
    g.useful = std::floor(ran / o.checkpoint) * o.checkpoint;
    g.hardware = true;
    fate.exit_code = 1;
    fate.local_rank = failing_rank;
    fate.last_lines = {"Traceback (most recent call last):", "    loss.backward()", kEccLine};
  }
  saved += g.useful;
  fate.runs = absl::Seconds(g.to - t);
  ledger.generations.push_back(g);
  return fate;
}

pb::JobSpec SpecFor(const JobPlan& plan, int n) {
  pb::JobSpec spec =
      hetpool::bench::SimTrainingSpec(absl::StrCat("goodput-", n), absl::StrCat("user", n % 20), plan.cards);
  spec.set_max_restarts(3);
  return spec;
}

absl::StatusOr<nlohmann::json> RunMode(const Options& o, const Scenario& scenario, const std::string& mode) {
  TestCluster::Options options;
  if (mode == "off") options.daemon_args = {"--quarantine-after", "0"};
  TestCluster cluster(options);
  if (auto s = cluster.StartDaemon(0, absl::Minutes(2)); !s.ok()) return s;
  auto inventory = hetpool::bench::TemplateInventory(o.cards, cluster.dir());
  if (!inventory.ok()) return inventory.status();
  Ledger ledger;
  FleetOptions fleet_options;
  fleet_options.daemon = cluster.address();
  fleet_options.fate = [&](const std::string& node, const pb::LaunchOrder& launch, absl::Time now) {
    return Fate(o, scenario, ledger, node, launch, now);
  };
  FleetSimulator fleet(fleet_options, hetpool::bench::FleetNodes(*inventory, o.nodes));
  if (auto s = fleet.Start(absl::Minutes(2)); !s.ok()) return s;
  {
    absl::MutexLock lock(&ledger.mu);
    ledger.start = absl::Now();
  }
  // The run's clock starts with the first submission: the pool fills as the queue does. A job is
  // in the ledger before its acknowledgement returns, so under the lock its launch waits for it.
  std::vector<std::string> ids;
  for (size_t n = 0; n < scenario.jobs.size(); ++n) {
    absl::MutexLock lock(&ledger.mu);
    auto job = cluster.Submit(SpecFor(scenario.jobs[n], static_cast<int>(n)));
    if (!job.ok()) return job.status();
    ids.push_back(job->id());
    ledger.plan_of[job->id()] = n;
  }
  absl::SleepFor(ledger.start + absl::Seconds(o.seconds) - absl::Now());
  const double end = o.seconds;
  nlohmann::json report = {{"mode", mode}};
  int lost = 0, succeeded = 0;
  for (const std::string& id : ids) {
    auto job = cluster.Get(id);
    if (!job.ok()) return job.status();
    lost += job->state() == pb::JOB_STATE_FAILED ? 1 : 0;
    succeeded += job->state() == pb::JOB_STATE_SUCCEEDED ? 1 : 0;
  }
  pb::ListDevicesResponse devices;
  grpc::ClientContext ctx;
  if (auto s = cluster.cluster().ListDevices(&ctx, pb::ListDevicesRequest(), &devices); !s.ok()) {
    return absl::UnavailableError(s.error_message());
  }
  int quarantined = 0, wrongly = 0;  // wrongly: a card that never failed
  for (const auto& d : devices.devices()) {
    if (!d.has_quarantine()) continue;
    ++quarantined;
    wrongly += scenario.fails_at.contains({d.node(), d.device().id()}) ? 0 : 1;
  }
  pb::ListNodesResponse nodes;
  grpc::ClientContext nodes_ctx;
  if (auto s = cluster.cluster().ListNodes(&nodes_ctx, pb::ListNodesRequest(), &nodes); !s.ok()) {
    return absl::UnavailableError(s.error_message());
  }
  int nodes_quarantined = 0;
  for (const auto& n : nodes.nodes()) nodes_quarantined += n.has_quarantine() ? 1 : 0;
  fleet.Stop();
  absl::MutexLock lock(&ledger.mu);
  double allocated = 0, useful = 0;
  int hardware = 0, black_hole = 0;
  for (const Ledger::Generation& g : ledger.generations) {
    if (g.from >= end) continue;
    const double to = std::min(g.to, end);
    allocated += g.cards * (to - g.from);
    // A generation still running at the end keeps what it has saved by then.
    useful += g.cards * (g.to <= end ? g.useful : std::floor((end - g.from) / o.checkpoint) * o.checkpoint);
    hardware += g.hardware ? 1 : 0;
    black_hole += g.black_hole ? 1 : 0;
  }
  report["goodput"] = allocated > 0 ? useful / allocated : 0;
  report["allocated_card_seconds"] = allocated;
  report["useful_card_seconds"] = useful;
  report["generations"] = ledger.generations.size();
  report["hardware_failures"] = hardware;
  report["black_hole_hits"] = black_hole;
  report["jobs_succeeded"] = succeeded;
  report["jobs_lost"] = lost;
  report["cards_quarantined"] = quarantined;
  report["cards_quarantined_wrongly"] = wrongly;
  report["nodes_quarantined"] = nodes_quarantined;
  return report;
}

int Usage(const std::string& why) {
  std::cerr << "goodput: " << why
            << "\nusage: goodput [--nodes N] [--seconds S] [--fault-scale X] [--checkpoint S] [--fail-after S]"
               " [--seed N] [--modes on,off] [-o json]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    auto number = [&](double& out) { return value != nullptr && absl::SimpleAtod(value, &out) && (++i, true); };
    double x = 0;
    if (arg == "--nodes" && number(x)) {
      o.nodes = static_cast<int>(x);
    } else if (arg == "--seconds" && number(o.seconds)) {
    } else if (arg == "--fault-scale" && number(o.fault_scale)) {
    } else if (arg == "--checkpoint" && number(o.checkpoint)) {
    } else if (arg == "--fail-after" && number(o.fail_after)) {
    } else if (arg == "--seed" && number(x)) {
      o.seed = static_cast<uint32_t>(x);
    } else if (arg == "--modes" && value != nullptr) {
      o.modes = absl::StrSplit(value, ',');
      ++i;
    } else if (arg == "-o" && value != nullptr) {
      o.output = value;
      ++i;
    } else {
      return Usage(absl::StrCat("unknown or incomplete argument ", arg));
    }
  }
  if (o.nodes < 1 || o.seconds <= 0 || o.checkpoint <= 0 || o.fault_scale < 0) return Usage("bad sizes");
  const Scenario scenario = Draw(o);
  nlohmann::json out = {{"nodes", o.nodes},
                        {"cards", o.nodes * o.cards},
                        {"seconds", o.seconds},
                        {"fault_probability_per_card", std::min(1.0, kLlama3HardwareFailuresPerCard * o.fault_scale)},
                        {"cards_failing", scenario.fails_at.size()},
                        {"jobs", scenario.jobs.size()},
                        {"checkpoint_s", o.checkpoint},
                        {"modes", nlohmann::json::array()}};
  for (const std::string& mode : o.modes) {
    if (mode != "on" && mode != "off") return Usage("modes are on and off");
    auto report = RunMode(o, scenario, mode);
    if (!report.ok()) {
      std::cerr << "goodput: quarantine " << mode << ": " << report.status() << "\n";
      return 1;
    }
    out["modes"].push_back(*report);
    if (o.output != "json") {
      std::cout << absl::StrFormat(
          "quarantine %-3s goodput %.3f  hardware failures %d (black-hole hits %d)  jobs lost %d  succeeded %d  "
          "cards quarantined %d (%d never failed), nodes %d\n",
          mode, (*report)["goodput"].get<double>(), (*report)["hardware_failures"].get<int>(),
          (*report)["black_hole_hits"].get<int>(), (*report)["jobs_lost"].get<int>(),
          (*report)["jobs_succeeded"].get<int>(), (*report)["cards_quarantined"].get<int>(),
          (*report)["cards_quarantined_wrongly"].get<int>(), (*report)["nodes_quarantined"].get<int>());
    }
  }
  if (o.output == "json") {
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << absl::StrFormat("%d cards, %d failing (p=%.3f each), %zu jobs, checkpoint every %.0f s, %.0f s run\n",
                                 o.nodes * o.cards, static_cast<int>(scenario.fails_at.size()),
                                 out["fault_probability_per_card"].get<double>(), scenario.jobs.size(), o.checkpoint,
                                 o.seconds);
  }
  return 0;
}
