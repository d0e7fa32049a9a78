// sharing_replay: the Alibaba GPU trace replayed over time through hetpoold's own ClusterState
// (submission, the scheduling cycle with its policy and fair-share queues, agents' process
// reports) on a simulated clock, to compare queue policies as issue 16 asks: GPU allocation over
// time, queueing delay per class of request, and Jain's fairness index of the groups' shares
// while every group has jobs waiting.
//
// With --high F a share F of the pods (by another stable hash) asks for priority 10, the rest 0;
// every pod saves a checkpoint every --checkpoint (its checkpoint_interval), so a preempted pod
// keeps the work up to its last one and runs the rest when placed again; its processes take
// --stop to exit after the kill order (the SIGTERM a real job checkpoints on). Under the
// defragmentation policy every pod is `movable`, and hetpoold's --defrag-after,
// --defrag-moves-per-hour, --defrag-move-burst and --defrag-requeue-after are the bench's flags
// of the same names (the json's `requeued_wait`: how long stopped pods waited for their next
// place). Under the elastic policy every pod of two or more whole cards is elastic over one or
// two nodes of that many cards (an assumption the trace cannot confirm: it says which pods
// asked for several cards, not whether they scale) and runs twice as fast on two (linear
// scaling); hetpoold's --elastic-grow-after is the bench's flag of that name.
//
// A pod still waiting at the last arrival counts as waiting until then, which understates the
// longest waits; with --drain the replay runs on without arrivals until every pod is placed, so
// each wait is the pod's own (the figures over time stay those of the arrival window).
// --explain adds the slowest gangs' events (hetpoold's own: why each waited, who moved for it).
//
// The trace's pods carry creation, scheduled and deletion times; a pod runs for its own
// (deletion - scheduled) seconds once hetpool places it. Over its 150 days the trace keeps ~14 of
// its 6,212 GPUs busy on average, so arrivals are compressed (--compress, or --load: offered
// card-seconds per card of the sampled pool) on a sample of the GPU nodes (--nodes, every k-th,
// which keeps the mix of models) to make the queue contended. Each pod belongs to one of
// --groups equally weighted groups by a stable hash of its name. The simulated agents report
// every process on their node, as real ones do; the bench only stands in for time and torchrun.
//
//   build/tests/sharing_replay --trace ../shared/traces/alibaba-gpu-v2023/csv --nodes 120 --load 1.3 --high 0.1
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "drivers/fingerprint/fingerprint.h"
#include "drivers/fingerprint/spec_table.h"
#include "hetpool/vendor.h"
#include "nlohmann/json.hpp"
#include "scheduler/framework/profile.h"
#include "spdlog/spdlog.h"
#include "scheduler/trace/trace_replay.h"
#include "src/common/convert.h"
#include "src/daemon/state/cluster_state.h"
#include "tests/testing/memory_store.h"

namespace {

namespace pb = ::hetpool::v1;
namespace trace = ::hetpool::scheduler::trace;

struct Options {
  std::string trace_dir;
  std::string workload = "default";
  size_t nodes = 120;
  double load = 1.3;    // offered card-seconds / (cards x window); ignored when compress > 0
  double compress = 0;  // arrival times divided by this
  int groups = 4;
  double heavy = 0;  // > 0: this share of the pods goes to g0, the rest equally to the others
  absl::Duration half_life = absl::Hours(1);
  // Pods that ran longer are services, not jobs: with arrivals compressed they would never leave.
  absl::Duration max_runtime = absl::Hours(24);
  double high = 0;                                // share of the pods at priority 10
  absl::Duration checkpoint = absl::Minutes(30);  // every pod's checkpoint_interval
  absl::Duration stop = absl::Seconds(30);        // kill order to exit
  absl::Duration defrag_after = absl::Minutes(10);
  int defrag_moves_per_hour = 30;
  int defrag_move_burst = 0;  // hetpoold's --defrag-move-burst (0: the hour's moves at once)
  absl::Duration defrag_requeue_after = absl::Minutes(30);
  absl::Duration elastic_grow_after = absl::Minutes(10);
  // Past the last arrival, run on with no new pods until every pod has been placed: its true
  // wait, where the window would cut it off (see Run).
  bool drain = false;
  bool explain = false;  // the slowest gangs' events (hetpoold's own, with minutes since arrival)
  // Salts the hashes that assign groups and priorities (0: the names alone): other draws of the
  // same mix, to tell a policy's effect from one draw's luck.
  int seed = 0;
  std::vector<std::string> policies = {"fifo+backfill", "fair-share", "fair-share+preemption",
                                       "fair-share+preemption+elastic", "fair-share+preemption+defrag"};
  std::string output = "table";
};

uint64_t StableHash(const std::string& text) {  // FNV-1a: the same group on every run and machine
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

// The name hashed with --seed's salt.
uint64_t SeededHash(const std::string& text, const Options& o) {
  // The salt goes first: FNV-1a carries a difference in early bytes through every later one, while
  // one in the last byte barely reaches the high bits (priorities) and only relabels the groups.
  return StableHash(o.seed == 0 ? text : absl::StrCat(o.seed, "/", text));
}

// Equal groups by a stable hash of the pod's name; with --heavy, g0 submits that share of them.
std::string GroupOf(const std::string& pod, const Options& o) {
  const uint64_t h = SeededHash(pod, o);
  if (o.heavy <= 0) return "g" + std::to_string(h % static_cast<uint64_t>(o.groups));
  const double u = static_cast<double>(h >> 11) / static_cast<double>(1ull << 53);
  if (u < o.heavy || o.groups == 1) return "g0";
  return "g" + std::to_string(1 + (h % static_cast<uint64_t>(o.groups - 1)));
}

// Priority 10 for a share `high` of the pods (a hash other than the group's), else 0.
int PriorityOf(const std::string& pod, const Options& o) {
  const uint64_t h = SeededHash("priority/" + pod, o);
  return static_cast<double>(h >> 11) / static_cast<double>(1ull << 53) < o.high ? 10 : 0;
}

// The class a pod's queueing delay is reported under.
std::string ClassOf(const trace::TracePod& p) {
  if (p.num_gpu == 1 && p.gpu_milli < 1000) return "share";
  if (p.num_gpu == 1) return "1-card";
  if (p.num_gpu < 4) return "2-3-cards";
  return "4+-cards";
}

struct Pod {
  trace::TracePod trace;
  absl::Time arrival;
  absl::Duration runtime;
  std::string group;
  int priority = 0;
  std::string job_id;
  std::optional<absl::Time> scheduled;  // first placed
  std::optional<absl::Time> decided;    // first placed, or first preempted for
  // The current run: on which nodes, which generation, since when, until when; and the work kept
  // from runs before it (up to their last checkpoints), in seconds of the trace's run on one node.
  bool running = false;
  std::vector<std::string> on;
  uint64_t generation = 0;
  absl::Time started, ends_at;
  absl::Duration done;
  // Stopped by the daemon (preempted, moved, resized) and waiting for its next place: since when,
  // and why (the cost a stop puts on the stopped job beyond its lost work).
  std::optional<absl::Time> requeued_at;
  std::string requeued_by;
};

// Hears the daemon preempt, move or resize a job (hetpoold's StateObserver seam, which its
// metrics use).
class PreemptionLog final : public hetpool::daemon::StateObserver {
 public:
  enum class Kind { kPreempted, kMoved, kResized };
  void Decision(const pb::Job&, absl::Duration, bool) override {}
  void StoreWrite(absl::Duration, bool) override {}
  void SchedulingPass(absl::Duration, bool) override {}
  void JobEnded(const pb::Job&) override {}
  void JobRestarted(const pb::Job& job, const std::string& reason) override {
    if (reason == hetpool::daemon::kRestartPreempted)
      victims.push_back({job.id(), job.last_preemption().by_job(), Kind::kPreempted});
    if (reason == hetpool::daemon::kRestartMoved)
      victims.push_back({job.id(), job.last_preemption().by_job(), Kind::kMoved});
    if (reason == hetpool::daemon::kRestartResized)
      victims.push_back({job.id(), job.last_resize().by_job(), Kind::kResized});
  }
  struct Victim {
    std::string id;
    std::string by;  // empty: an elastic job grown into free cards
    Kind kind;
  };
  std::vector<Victim> victims;
};

hetpool::NodeInventory InventoryOf(const trace::TraceNode& n) {
  hetpool::NodeInventory inventory;
  inventory.cpus = static_cast<int>(n.cpu_milli / 1000);
  inventory.memory_mib = static_cast<uint64_t>(n.memory_mib);
  static const auto specs = hetpool::drivers::SpecTable::Defaults();
  for (int i = 0; i < n.gpus; ++i) {
    hetpool::DeviceRecord d;
    d.vendor = hetpool::Vendor::kNvidia;
    d.index = i;
    d.id = "nvidia" + std::to_string(i);
    d.model = n.model;
    d.memory_mib = 16384;
    hetpool::drivers::ApplyFingerprint(specs, d);
    inventory.devices.push_back(d);
  }
  return inventory;
}

pb::JobSpec SpecOf(const Pod& pod, const Options& o, bool movable, bool elastic) {
  pb::JobSpec spec;
  spec.set_name(pod.trace.name);
  spec.set_user("u-" + pod.group);
  spec.set_group(pod.group);
  spec.set_priority(pod.priority);
  spec.set_working_dir("/tmp");
  spec.add_command("/bin/true");
  spec.set_nnodes(1);
  spec.set_devices_per_node(pod.trace.num_gpu);
  spec.set_procs_per_node(pod.trace.num_gpu);
  if (pod.trace.gpu_milli < 1000) spec.set_device_milli(pod.trace.gpu_milli);
  spec.mutable_requirements()->add_vendors("nvidia");
  for (const auto& model : pod.trace.gpu_spec) spec.mutable_requirements()->add_models(model);
  spec.mutable_host()->set_cpu_milli_per_process(std::max<int64_t>(1, pod.trace.cpu_milli / pod.trace.num_gpu));
  spec.mutable_host()->set_memory_mib_per_node(pod.trace.memory_mib);
  spec.mutable_checkpoint_interval()->set_seconds(absl::ToInt64Seconds(o.checkpoint));
  spec.set_movable(movable);
  if (elastic && pod.trace.num_gpu >= 2 && pod.trace.gpu_milli >= 1000) {
    spec.mutable_elastic_nnodes()->set_min(1);
    spec.mutable_elastic_nnodes()->set_max(2);
  }
  return spec;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(
      std::min<double>(static_cast<double>(v.size()) - 1, std::floor(q * static_cast<double>(v.size()))))];
}

// One policy's run over the same pods and nodes.
nlohmann::json Run(const std::string& policy, const std::vector<trace::TraceNode>& nodes, std::vector<Pod> pods,
                   const Options& o) {
  absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  hetpool::testing::MemoryStore store;  // the store's cost is not what this measures
  auto framework = hetpool::scheduler::DefaultFramework();
  hetpool::daemon::ClusterOptions options;
  options.clock = [&now] { return now; };
  options.monotonic_clock = [&now] { return now; };
  options.lease_ttl = absl::Hours(100000);               // simulated agents report only when something changes
  options.max_events_per_job = o.explain ? 100000 : 20;  // --explain keeps every event of a job
  PreemptionLog preemptions;
  options.observer = &preemptions;
  if (policy != "fifo+backfill") {
    hetpool::daemon::QueueConfig queues;
    queues.usage_half_life = o.half_life;
    for (int g = 0; g < o.groups; ++g) queues.groups["g" + std::to_string(g)] = hetpool::daemon::GroupQueue{1, {}};
    options.queues = queues;
  }
  const bool defrag = policy == "fair-share+preemption+defrag";
  const bool elastic = policy == "fair-share+preemption+elastic";
  if (policy == "fair-share+preemption" || defrag || elastic) {
    options.preemption = hetpool::daemon::PreemptionMode::kFairShare;
  }
  if (defrag) {
    options.defrag = {o.defrag_after, o.defrag_moves_per_hour, absl::Hours(1), o.defrag_requeue_after,
                      o.defrag_move_burst};
  }
  options.elastic_grow_after = o.elastic_grow_after;
  hetpool::daemon::ClusterState state(options, &store, framework.get());
  if (auto s = state.Load(); !s.ok()) {
    std::cerr << "sharing_replay: " << s << "\n";
    std::exit(1);
  }
  std::map<std::string, std::string> sessions;  // node -> session
  int64_t capacity = 0;
  for (const auto& n : nodes) {
    pb::RegisterRequest req;
    req.set_node_name(n.name);
    req.set_address("10.0.0.1");
    req.set_torchrun_path("/usr/bin/torchrun");
    req.set_work_dir("/var/lib/hetpool");
    *req.mutable_inventory() = hetpool::ToProto(InventoryOf(n));
    auto r = state.Register(req);
    if (!r.ok()) {
      std::cerr << "sharing_replay: register " << n.name << ": " << r.status() << "\n";
      std::exit(1);
    }
    sessions[n.name] = r->session_id();
    capacity += 1000L * n.gpus;
  }

  std::map<std::string, Pod*> by_job;
  // node -> the (job id, generation) of every process on it: a stopped generation still exiting
  // and the job's next one may share a node, and each ends on its own.
  std::map<std::string, std::set<std::pair<std::string, uint64_t>>> running_on;
  std::multimap<absl::Time, Pod*> departures;
  struct Stop {
    Pod* pod;
    std::vector<std::string> on;
    uint64_t generation = 0;
  };
  std::multimap<absl::Time, Stop> stops;  // preempted runs, exiting
  size_t preempted = 0, moved = 0, resized = 0, grown = 0;
  double card_hours_lost = 0, move_card_hours_lost = 0, resize_card_hours_lost = 0;
  // Stopped jobs' waits for their next place, by kind of stop (minutes; card-hours waited).
  std::map<std::string, std::vector<double>> requeued_wait;
  std::map<std::string, double> requeued_card_hours;
  auto count_requeued_wait = [&](const Pod& pod, absl::Time placed) {
    const double minutes = absl::ToDoubleMinutes(placed - *pod.requeued_at);
    requeued_wait[pod.requeued_by].push_back(minutes);
    requeued_card_hours[pod.requeued_by] += minutes / 60 * static_cast<double>(pod.trace.GpuDemand()) / 1000;
  };
  std::map<std::string, int> pending_by_group;
  std::map<std::string, int64_t> held_by_group;
  // Dominant shares, as fair share weighs them: per group and model, held over an equal part of
  // the model's cards.
  std::map<std::string, std::string> model_of;  // node -> model
  std::map<std::string, int64_t> model_capacity;
  for (const auto& n : nodes) {
    model_of[n.name] = n.model;
    model_capacity[n.model] += 1000L * n.gpus;
  }
  std::map<std::string, std::map<std::string, int64_t>> held_by_group_model;
  double jain_dominant_integral = 0;
  size_t next_arrival = 0, refused = 0;
  const absl::Time start = pods.front().arrival, end = pods.back().arrival;
  double allocation_integral = 0, jain_integral = 0, backlogged_seconds = 0;
  int64_t allocated = 0;
  const auto wall_start = std::chrono::steady_clock::now();

  // The node's agent reports every process it has: the running ones, and `exited` (a job and
  // generation) as ended.
  auto report = [&](const std::string& node, const std::pair<std::string, uint64_t>& exited) {
    pb::HeartbeatRequest hb;
    hb.set_node_name(node);
    hb.set_session_id(sessions[node]);
    hb.set_applied_orders_version(UINT64_MAX);
    for (const auto& process : running_on[node]) {
      pb::ProcessStatus* p = hb.add_processes();
      p->set_job_id(process.first);
      p->set_generation(process.second);
      p->set_running(process != exited);
      p->set_exited(process == exited);
    }
    if (auto s = state.Heartbeat(hb); !s.ok()) std::cerr << "sharing_replay: heartbeat: " << s.status() << "\n";
  };

  // A run ends (it finished, or its preempted processes exited): its nodes report it, and its
  // cards are free.
  auto run_ended = [&](Pod* pod, const std::vector<std::string>& on, uint64_t generation) {
    for (const std::string& node : on) {
      report(node, {pod->job_id, generation});
      running_on[node].erase({pod->job_id, generation});
      allocated -= pod->trace.GpuDemand();
      held_by_group[pod->group] -= pod->trace.GpuDemand();
      held_by_group_model[pod->group][model_of[node]] -= pod->trace.GpuDemand();
    }
  };
  // A pod not placed by the last arrival waits on: within the window its wait is cut off at the
  // window's end, which understates the longest waits, most under the policy that keeps gangs
  // waiting longest. With --drain the replay goes on (departures and stops, no arrivals) until
  // every pod has been placed; the figures over time stay those of the window.
  const absl::Time horizon = o.drain ? absl::InfiniteFuture() : end;
  auto any_pending = [&] {
    return std::any_of(pending_by_group.begin(), pending_by_group.end(), [](const auto& g) { return g.second > 0; });
  };
  while (next_arrival < pods.size() || (!departures.empty() && departures.begin()->first <= end) ||
         (!stops.empty() && stops.begin()->first <= end) ||
         (o.drain && any_pending() && (!departures.empty() || !stops.empty()))) {
    absl::Time t = horizon;
    if (next_arrival < pods.size()) t = std::min(t, pods[next_arrival].arrival);
    if (!departures.empty()) t = std::min(t, departures.begin()->first);
    if (!stops.empty()) t = std::min(t, stops.begin()->first);
    // Time-weighted figures over the interval that just passed, within the window.
    const double dt = absl::ToDoubleSeconds(std::min(t, end) - now);
    if (dt > 0 && now >= start) {
      allocation_integral += dt * static_cast<double>(allocated) / static_cast<double>(capacity);
      const bool all_backlogged =
          static_cast<int>(pending_by_group.size()) == o.groups &&
          std::all_of(pending_by_group.begin(), pending_by_group.end(), [](const auto& g) { return g.second > 0; });
      if (all_backlogged) {
        double sum = 0, squares = 0;
        for (int g = 0; g < o.groups; ++g) {
          const double x = static_cast<double>(held_by_group["g" + std::to_string(g)]);
          sum += x;
          squares += x * x;
        }
        jain_integral += dt * (squares > 0 ? sum * sum / (o.groups * squares) : 1.0);
        double dsum = 0, dsquares = 0;
        for (int g = 0; g < o.groups; ++g) {
          double dominant = 0;
          for (const auto& [model, held] : held_by_group_model["g" + std::to_string(g)]) {
            dominant =
                std::max(dominant, static_cast<double>(held) * o.groups / static_cast<double>(model_capacity[model]));
          }
          dsum += dominant;
          dsquares += dominant * dominant;
        }
        jain_dominant_integral += dt * (dsquares > 0 ? dsum * dsum / (o.groups * dsquares) : 1.0);
        backlogged_seconds += dt;
      }
    }
    now = std::max(now, t);
    while (!departures.empty() && departures.begin()->first <= now) {
      Pod* pod = departures.begin()->second;
      departures.erase(departures.begin());
      pod->running = false;
      run_ended(pod, pod->on, pod->generation);
    }
    while (!stops.empty() && stops.begin()->first <= now) {
      const Stop stop = stops.begin()->second;
      stops.erase(stops.begin());
      run_ended(stop.pod, stop.on, stop.generation);
    }
    while (next_arrival < pods.size() && pods[next_arrival].arrival <= now) {
      Pod& pod = pods[next_arrival++];
      auto job = state.Submit(SpecOf(pod, o, defrag, elastic), "");
      if (!job.ok()) {
        ++refused;  // never fits the sampled pool (a model it lacks, more cards than a node has)
        continue;
      }
      pod.job_id = job->id();
      by_job[pod.job_id] = &pod;
      ++pending_by_group[pod.group];
    }
    state.Tick();
    // What the cycle placed: the agents start it (a report that it runs), and it ends after its
    // own runtime.
    pb::ListJobsRequest scheduled;
    scheduled.add_states(pb::JOB_STATE_SCHEDULED);
    std::set<std::string> nodes_to_report;
    do {
      auto page = state.ListJobs(scheduled);
      if (!page.ok()) break;
      for (const pb::Job& job : page->jobs()) {
        Pod* pod = by_job[job.id()];
        if (pod == nullptr || pod->running) continue;
        if (!pod->scheduled) pod->scheduled = now;
        if (!pod->decided) pod->decided = now;
        if (pod->requeued_at) {
          count_requeued_wait(*pod, now);
          pod->requeued_at.reset();
        }
        pod->running = true;
        pod->on.clear();
        for (const auto& p : job.placement()) pod->on.push_back(p.node());
        pod->generation = job.generation();
        pod->started = now;
        // On n nodes an elastic pod runs n times as fast (the bench's assumption).
        pod->ends_at = now + (pod->runtime - pod->done) / static_cast<double>(pod->on.size());
        departures.emplace(pod->ends_at, pod);
        for (const std::string& node : pod->on) {
          running_on[node].insert({job.id(), pod->generation});
          nodes_to_report.insert(node);
          allocated += pod->trace.GpuDemand();
          held_by_group[pod->group] += pod->trace.GpuDemand();
          held_by_group_model[pod->group][model_of[node]] += pod->trace.GpuDemand();
        }
        --pending_by_group[pod->group];
      }
      scheduled.set_page_token(page->next_page_token());
    } while (!scheduled.page_token().empty());
    for (const auto& node : nodes_to_report) report(node, {});
    // Runs the daemon preempted, moved or resized: they keep the work up to their last
    // checkpoint, and their processes exit after --stop (their cards stay held until then).
    for (const auto& stopped : preemptions.victims) {
      Pod* victim = by_job[stopped.id];
      if (Pod* preemptor = by_job[stopped.by]; preemptor != nullptr && !preemptor->decided) preemptor->decided = now;
      if (victim == nullptr || !victim->running) continue;
      using Kind = PreemptionLog::Kind;
      ++(stopped.kind == Kind::kMoved ? moved : stopped.kind == Kind::kResized ? resized : preempted);
      if (stopped.kind == Kind::kResized && stopped.by.empty()) ++grown;
      const absl::Duration ran = now - victim->started;
      const absl::Duration kept = o.checkpoint > absl::ZeroDuration() ? ran - ran % o.checkpoint : absl::ZeroDuration();
      const double width = static_cast<double>(victim->on.size());
      (stopped.kind == Kind::kMoved     ? move_card_hours_lost
       : stopped.kind == Kind::kResized ? resize_card_hours_lost
                                        : card_hours_lost) +=
          static_cast<double>(victim->trace.GpuDemand()) / 1000 * width * absl::ToDoubleHours(ran - kept);
      victim->done += kept * width;
      victim->running = false;
      for (auto [it, last] = departures.equal_range(victim->ends_at); it != last; ++it) {
        if (it->second == victim) {
          departures.erase(it);
          break;
        }
      }
      stops.emplace(now + o.stop, Stop{victim, victim->on, victim->generation});
      victim->requeued_at = now;
      victim->requeued_by = stopped.kind == Kind::kMoved     ? "moved"
                            : stopped.kind == Kind::kResized ? "resized"
                                                             : "preempted";
      ++pending_by_group[victim->group];
    }
    preemptions.victims.clear();
  }

  // Where a wait not ended by a placement is cut off: the window's end, or (with --drain) the
  // last event, when nothing runs any more to make room.
  const absl::Time cut = std::max(now, end);
  // Why jobs still wait at the end, by the first words of the reason.
  std::map<std::string, int> waiting_reasons;
  for (const Pod& pod : pods) {
    if (pod.job_id.empty() || pod.scheduled) continue;
    auto job = state.GetJob(pod.job_id);
    if (job.ok()) ++waiting_reasons[job->message().substr(0, 90)];
  }
  std::map<std::string, std::vector<double>> delays;  // class -> minutes
  size_t never = 0, placed_after_window = 0;
  for (const Pod& pod : pods) {
    if (pod.job_id.empty()) continue;
    if (pod.scheduled && *pod.scheduled > end) ++placed_after_window;
    const absl::Time placed = pod.scheduled.value_or(cut);
    if (!pod.scheduled) ++never;
    delays[ClassOf(pod.trace)].push_back(absl::ToDoubleMinutes(placed - pod.arrival));
    delays["all"].push_back(absl::ToDoubleMinutes(placed - pod.arrival));
    // The same waits cut off at the window's end, as a run without --drain reports them.
    if (o.drain)
      delays[ClassOf(pod.trace) + "@window"].push_back(absl::ToDoubleMinutes(std::min(placed, end) - pod.arrival));
    if (pod.priority > 0) {
      delays["high"].push_back(absl::ToDoubleMinutes(placed - pod.arrival));
      delays["high-decided"].push_back(absl::ToDoubleMinutes(pod.decided.value_or(cut) - pod.arrival));
    }
  }
  // The gangs of 4+ cards that waited longest, with their shape: what a policy did not place.
  std::vector<const Pod*> gangs;
  for (const Pod& pod : pods) {
    if (!pod.job_id.empty() && ClassOf(pod.trace) == "4+-cards") gangs.push_back(&pod);
  }
  auto waited = [&](const Pod* pod) { return pod->scheduled.value_or(cut) - pod->arrival; };
  std::sort(gangs.begin(), gangs.end(), [&](const Pod* a, const Pod* b) { return waited(a) > waited(b); });
  nlohmann::json slowest = nlohmann::json::array();
  for (size_t i = 0; i < std::min<size_t>(gangs.size(), 5); ++i) {
    const Pod& pod = *gangs[i];
    nlohmann::json row = {{"pod", pod.trace.name},
                          {"cards", pod.trace.num_gpu},
                          {"cpu_milli", pod.trace.cpu_milli},
                          {"memory_mib", pod.trace.memory_mib},
                          {"models", pod.trace.gpu_spec},
                          {"waited_minutes", absl::ToDoubleMinutes(waited(&pod))},
                          {"placed", pod.scheduled.has_value()}};
    auto job = state.GetJob(pod.job_id);
    if (job.ok() && !pod.scheduled) row["message"] = job->message();
    if (job.ok() && o.explain) {
      for (const pb::JobEvent& event : job->events()) {
        row["events"].push_back(
            absl::StrFormat("%.1f %s %s", absl::ToDoubleMinutes(hetpool::FromProtoTime(event.time()) - pod.arrival),
                            event.reason(), event.message()));
      }
    }
    slowest.push_back(std::move(row));
  }
  const double window = absl::ToDoubleSeconds(end - start);
  nlohmann::json out = {
      {"slowest_gangs", slowest},
      {"policy", policy},
      {"allocation", window > 0 ? allocation_integral / window : 0},
      {"jain_backlogged", backlogged_seconds > 0 ? jain_integral / backlogged_seconds : 0},
      {"jain_dominant_backlogged", backlogged_seconds > 0 ? jain_dominant_integral / backlogged_seconds : 0},
      {"backlogged_share_of_time", window > 0 ? backlogged_seconds / window : 0},
      {"pods", pods.size()},
      {"refused_at_submit", refused},
      {"never_placed", never},
      {"placed_after_window", placed_after_window},
      {"drained_hours", absl::ToDoubleHours(cut - end)},
      {"preemptions", preempted},
      {"card_hours_lost", card_hours_lost},
      {"moves", moved},
      {"move_card_hours_lost", move_card_hours_lost},
      {"resizes", resized},
      {"grown", grown},
      {"resize_card_hours_lost", resize_card_hours_lost},
      {"waiting_at_end", waiting_reasons},
      {"wall_seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count()},
  };
  // A stopped job still waiting at the end waits until then.
  for (const Pod& pod : pods) {
    if (pod.requeued_at) count_requeued_wait(pod, end);
  }
  for (const auto& [kind, v] : requeued_wait) {
    out["requeued_wait"][kind] = {{"n", v.size()},
                                  {"p50_minutes", Percentile(v, 0.5)},
                                  {"p99_minutes", Percentile(v, 0.99)},
                                  {"card_hours", requeued_card_hours[kind]}};
  }
  for (const auto& [cls, v] : delays) {
    out["delay_minutes"][cls] = {{"n", v.size()}, {"p50", Percentile(v, 0.5)}, {"p99", Percentile(v, 0.99)}};
  }
  return out;
}

int Usage(const std::string& message) {
  std::cerr
      << "sharing_replay: " << message
      << "\nusage: sharing_replay --trace DIR [--workload default] [--nodes 120] [--load 1.3 | --compress K]"
         " [--groups 4] [--heavy 0.55] [--high 0.1] [--policies fifo+backfill,fair-share,fair-share+preemption,"
         "fair-share+preemption+elastic,fair-share+preemption+defrag] [--elastic-grow-after 10m] [--defrag-after 10m]"
         " [--defrag-moves-per-hour 30] [--defrag-move-burst 0] [--defrag-requeue-after 30m] [--checkpoint 30m]"
         " [--stop 30s] [--half-life 1h]"
         " [--max-runtime 24h] [--drain] [--explain] [--seed 0] [-o table|json]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);  // every job's events are the daemon's info lines
  Options o;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--drain" || flag == "--explain") {  // the flags without a value
      (flag == "--drain" ? o.drain : o.explain) = true;
      --i;
      continue;
    }
    if (i + 1 >= argc) return Usage(flag + ": needs a value");
    const std::string value = argv[i + 1];
    if (flag == "--trace") {
      o.trace_dir = value;
    } else if (flag == "--workload") {
      o.workload = value;
    } else if (flag == "--nodes") {
      o.nodes = std::stoul(value);
    } else if (flag == "--load") {
      o.load = std::stod(value);
    } else if (flag == "--compress") {
      o.compress = std::stod(value);
    } else if (flag == "--seed") {
      if (!absl::SimpleAtoi(value, &o.seed) || o.seed < 0) return Usage("--seed: not a whole number of at least 0");
    } else if (flag == "--heavy") {
      o.heavy = std::stod(value);
    } else if (flag == "--policies") {
      o.policies = absl::StrSplit(value, ',');
      for (const auto& policy : o.policies) {
        if (policy != "fifo+backfill" && policy != "fair-share" && policy != "fair-share+preemption" &&
            policy != "fair-share+preemption+elastic" && policy != "fair-share+preemption+defrag") {
          return Usage("--policies: " + policy +
                       " is not fifo+backfill, fair-share, fair-share+preemption, fair-share+preemption+elastic or "
                       "fair-share+preemption+defrag");
        }
      }
    } else if (flag == "--defrag-after") {
      if (!absl::ParseDuration(value, &o.defrag_after)) return Usage("--defrag-after: not a duration");
    } else if (flag == "--elastic-grow-after") {
      if (!absl::ParseDuration(value, &o.elastic_grow_after)) return Usage("--elastic-grow-after: not a duration");
    } else if (flag == "--defrag-requeue-after") {
      if (!absl::ParseDuration(value, &o.defrag_requeue_after)) return Usage("--defrag-requeue-after: not a duration");
    } else if (flag == "--defrag-moves-per-hour") {
      o.defrag_moves_per_hour = std::stoi(value);
    } else if (flag == "--defrag-move-burst") {
      o.defrag_move_burst = std::stoi(value);
    } else if (flag == "--high") {
      o.high = std::stod(value);
    } else if (flag == "--checkpoint") {
      if (!absl::ParseDuration(value, &o.checkpoint)) return Usage("--checkpoint: not a duration");
    } else if (flag == "--stop") {
      if (!absl::ParseDuration(value, &o.stop)) return Usage("--stop: not a duration");
    } else if (flag == "--groups") {
      o.groups = std::stoi(value);
    } else if (flag == "--half-life") {
      if (!absl::ParseDuration(value, &o.half_life)) return Usage("--half-life: not a duration");
    } else if (flag == "--max-runtime") {
      if (!absl::ParseDuration(value, &o.max_runtime)) return Usage("--max-runtime: not a duration");
    } else if (flag == "-o") {
      o.output = value;
    } else {
      return Usage("unknown flag " + flag);
    }
  }
  if (o.trace_dir.empty()) return Usage("--trace DIR is needed (../shared/traces/alibaba-gpu-v2023/csv)");
  auto all_nodes = trace::LoadNodes(o.trace_dir + "/openb_node_list_gpu_node.csv");
  auto all_pods = trace::LoadPods(o.trace_dir + "/openb_pod_list_" + o.workload + ".csv");
  if (!all_nodes.ok() || !all_pods.ok()) {
    std::cerr << "sharing_replay: " << (all_nodes.ok() ? all_pods.status() : all_nodes.status()) << "\n";
    return 1;
  }
  // Every k-th GPU node: the sample keeps the pool's mix of models.
  std::vector<trace::TraceNode> nodes;
  const size_t stride = std::max<size_t>(1, all_nodes->size() / std::max<size_t>(1, o.nodes));
  for (size_t i = 0; i < all_nodes->size() && nodes.size() < o.nodes; i += stride) nodes.push_back((*all_nodes)[i]);
  int64_t capacity = 0;
  for (const auto& n : nodes) capacity += 1000L * n.gpus;
  // Pods that ran (they have all three times) and ask for GPUs.
  std::vector<Pod> pods;
  size_t services = 0;
  int64_t first = INT64_MAX, last = 0;
  for (const auto& p : *all_pods) {
    if (p.num_gpu == 0 || p.creation_time < 0 || p.scheduled_time < 0 || p.deletion_time <= p.scheduled_time) continue;
    if (absl::Seconds(p.deletion_time - p.scheduled_time) > o.max_runtime) {
      ++services;
      continue;
    }
    Pod pod;
    pod.trace = p;
    pod.runtime = absl::Seconds(p.deletion_time - p.scheduled_time);
    pod.group = GroupOf(p.name, o);
    pod.priority = PriorityOf(p.name, o);
    first = std::min(first, p.creation_time);
    last = std::max(last, p.creation_time);
    pods.push_back(std::move(pod));
  }
  if (pods.empty()) return Usage("no pod in the workload has creation, scheduled and deletion times");
  // The compression that offers `load` card-seconds per card over the arrival window, counting
  // each pod only while it can run inside the window (some ran for the trace's whole 150 days).
  const double span = static_cast<double>(last - first);
  auto offered = [&](double k) {
    double sum = 0;
    for (const Pod& pod : pods) {
      sum += static_cast<double>(pod.trace.GpuDemand()) / 1000 * std::min(absl::ToDoubleSeconds(pod.runtime), span / k);
    }
    return sum / (static_cast<double>(capacity) / 1000 * span / k);
  };
  double compress = o.compress;
  if (compress <= 0) {
    double low = 1, high = 1e6;  // offered load grows with k
    for (int i = 0; i < 60; ++i) {
      const double mid = std::sqrt(low * high);
      (offered(mid) < o.load ? low : high) = mid;
    }
    compress = high;
  }
  const absl::Time t0 = absl::FromUnixSeconds(1'800'000'000);
  for (Pod& pod : pods)
    pod.arrival = t0 + absl::Seconds(static_cast<double>(pod.trace.creation_time - first) / compress);
  std::stable_sort(pods.begin(), pods.end(), [](const Pod& a, const Pod& b) { return a.arrival < b.arrival; });

  nlohmann::json report = {{"nodes", nodes.size()},
                           {"offered_load", offered(compress)},
                           {"left_out_longer_than_max_runtime", services},
                           {"cards", capacity / 1000},
                           {"compress", compress},
                           {"window_hours", absl::ToDoubleHours(pods.back().arrival - pods.front().arrival)},
                           {"groups", o.groups},
                           {"heavy_group_share", o.heavy},
                           {"half_life", absl::FormatDuration(o.half_life)},
                           {"high_priority_share", o.high},
                           {"checkpoint", absl::FormatDuration(o.checkpoint)},
                           {"stop", absl::FormatDuration(o.stop)},
                           {"defrag_after", absl::FormatDuration(o.defrag_after)},
                           {"defrag_moves_per_hour", o.defrag_moves_per_hour},
                           {"defrag_move_burst", o.defrag_move_burst},
                           {"defrag_requeue_after", absl::FormatDuration(o.defrag_requeue_after)},
                           {"elastic_grow_after", absl::FormatDuration(o.elastic_grow_after)},
                           {"drain", o.drain},
                           {"seed", o.seed},
                           {"policies", nlohmann::json::array()}};
  for (const std::string& policy : o.policies) report["policies"].push_back(Run(policy, nodes, pods, o));
  if (o.output == "json") {
    std::cout << report.dump(2) << "\n";
    return 0;
  }
  std::cout << absl::StrFormat(
      "%d nodes, %d cards; offered load %.2f; arrivals compressed %.0fx into %.1f h; %d groups; half-life %s\n",
      report["nodes"].get<int>(), report["cards"].get<int>(), report["offered_load"].get<double>(), compress,
      report["window_hours"].get<double>(), o.groups, report["half_life"].get<std::string>());
  std::cout << absl::StrFormat("%-30s %7s %6s %6s %8s %10s %10s %10s %10s %10s %8s %6s %7s %9s %6s\n", "POLICY",
                               "ALLOC", "JAIN", "JAIN-D", "BACKLOG", "1-CARD p50", "1-CARD p99", "4+ p99", "SHARE p99",
                               "HIGH p99", "PREEMPT", "MOVES", "RESIZES", "LOST c-h", "NEVER");
  for (const auto& r : report["policies"]) {
    auto p = [&](const char* cls, const char* q) {
      return r["delay_minutes"].contains(cls) ? absl::StrFormat("%.1f m", r["delay_minutes"][cls][q].get<double>())
                                              : "-";
    };
    std::cout << absl::StrFormat("%-30s %6.1f%% %6.3f %6.3f %7.0f%% %10s %10s %10s %10s %10s %8d %6d %7d %9.1f %6d\n",
                                 r["policy"].get<std::string>(), 100 * r["allocation"].get<double>(),
                                 r["jain_backlogged"].get<double>(), r["jain_dominant_backlogged"].get<double>(),
                                 100 * r["backlogged_share_of_time"].get<double>(), p("1-card", "p50"),
                                 p("1-card", "p99"), p("4+-cards", "p99"), p("share", "p99"), p("high", "p99"),
                                 r["preemptions"].get<int>(), r["moves"].get<int>(), r["resizes"].get<int>(),
                                 r["card_hours_lost"].get<double>() + r["move_card_hours_lost"].get<double>() +
                                     r["resize_card_hours_lost"].get<double>(),
                                 r["never_placed"].get<int>());
  }
  if (o.drain) {
    for (const auto& r : report["policies"]) {
      std::cout << absl::StrFormat("%s: drained %.1f h past the window, %d pods placed in it\n",
                                   r["policy"].get<std::string>(), r["drained_hours"].get<double>(),
                                   r["placed_after_window"].get<int>());
    }
  }
  return 0;
}
