// chaos: a bounded soak of the control plane under faults. With --store etcd (default): 3 etcd
// members, 3 hetpoold replicas on them; with --store sqlite: one hetpoold on SQLite, its data dir
// on a small tmpfs of its own (root only; else the disk-full fault is skipped). 2 simulated
// agents know every daemon. Each round submits a few short jobs (retrying across replicas with a
// request id until one acknowledges), then injects the next fault of --faults (cycled, in order):
//   kill-leader, kill-follower, kill-agent, kill-etcd   SIGKILL, restarted 1-3 s later
//   daemon-down     every hetpoold down for --outage (60 s), shorter than the orphan grace
//   frozen-agent    SIGSTOP on the agent running a long job, past its lease and the grace
//   disk-full       (sqlite) the data dir's filesystem full for a while: submits and cancels
//   store-damage    (sqlite) hetpool.db's index damaged on disk, hetpoold restarted on it
// A monitor samples /proc every 100 ms for the jobs' processes. At the end it checks:
//   - no acknowledged change lost: every acknowledged job there once (none duplicated, no
//     other jobs), every acknowledged cancel still CANCELLED;
//   - no job run twice: no restart after a fault that restarts nothing (every fault but an
//     agent's), so no finished job ran again and no running job was killed by a control-plane
//     outage shorter than the grace;
//   - never two generations of one job running at the same time;
//   - every job ends (SUCCEEDED, CANCELLED, or FAILED with a reason) once the faults stop.
// Figures: docs/reliability.md and docs/benchmarks.md.
//   chaos [--rounds 20] [--seed 1] [--jobs-per-round 3] [--store etcd|sqlite] [--faults a,b,...]
//         [--outage 60] [--grace 90]
#include <signal.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "hetpool/v1/cluster.grpc.pb.h"
#include "hetpool/v1/job.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "src/common/convert.h"
#include "tests/testing/cluster_harness.h"
#include "tests/testing/etcd_process.h"
#include "tests/testing/temp_dir.h"

namespace hetpool::testing {
namespace {

struct ChaosOptions {
  int rounds = 20;
  uint64_t seed = 1;
  int jobs_per_round = 3;
  bool sqlite = false;
  std::vector<std::string> faults;  // empty: the store's default list
  absl::Duration outage = absl::Seconds(60);
  absl::Duration grace = absl::Seconds(90);  // hetpoold --orphan-grace
};

// Faults after which no job may restart: only an agent's own death or freeze may cost a job.
bool RestartsNothing(const std::string& fault) { return fault != "kill-agent" && fault != "frozen-agent"; }

class Chaos {
 public:
  explicit Chaos(ChaosOptions options)
      : options_(std::move(options)),
        rounds_(options_.rounds),
        jobs_per_round_(options_.jobs_per_round),
        rng_(options_.seed),
        etcd_(dir_.path(), 3) {
    if (options_.faults.empty()) {
      options_.faults = options_.sqlite ? std::vector<std::string>{"kill-leader",  "disk-full",   "kill-agent",
                                                                   "store-damage", "daemon-down", "frozen-agent"}
                                        : std::vector<std::string>{"kill-leader", "kill-follower", "kill-etcd",
                                                                   "kill-agent",  "daemon-down",   "frozen-agent"};
    }
  }

  int Run() {
    const absl::Time start = absl::Now();
    const int daemons = options_.sqlite ? 1 : 3;
    if (options_.sqlite) {
      // A filesystem of its own, so "full" fills nothing else. Needs root.
      data_mount_ = dir_.path() + "/data";
      std::filesystem::create_directories(data_mount_);
      mounted_ = mount("tmpfs", data_mount_.c_str(), "tmpfs", 0, "size=64m") == 0;
      if (!mounted_) std::cerr << "chaos: cannot mount a tmpfs (not root?): disk-full will be skipped\n";
    } else if (absl::Status s = etcd_.Start(); !s.ok()) {
      return Fail(s);
    }
    for (int i = 0; i < daemons; ++i) {
      daemon_ports_.push_back(FreeTcpPort());
      jobs_stubs_.push_back(pb::JobService::NewStub(FastReconnectChannel(Address(i))));
      daemons_.emplace_back();
      if (absl::Status s = StartDaemon(i); !s.ok()) return Fail(s);
    }
    for (int i = 0; i < 2; ++i) {
      agents_.emplace_back();
      if (absl::Status s = StartAgent(i); !s.ok()) return Fail(s);
    }
    std::thread monitor([this] { Monitor(); });

    std::map<std::string, int> faults;
    std::shuffle(options_.faults.begin(), options_.faults.end(), rng_);
    for (int round = 0; round < rounds_; ++round) {
      for (int j = 0; j < jobs_per_round_; ++j) {
        const std::string request_id = absl::StrCat("chaos-", round, "-", j);
        auto id = Submit(request_id);
        if (!id.ok()) {
          monitor_stop_ = true;
          monitor.join();
          return Fail(id.status());
        }
        acknowledged_[request_id] = *id;
      }
      const std::string planned = options_.faults[static_cast<size_t>(round) % options_.faults.size()];
      fault_log_.push_back({absl::Now(), planned});
      const std::string fault = InjectFault(planned);
      ++faults[fault];
      std::cerr << "round " << round << ": " << acknowledged_.size() << " acknowledged, fault: " << fault << "\n";
    }
    // Faults stop; every job must end.
    std::map<std::string, int> final_states;
    std::vector<std::string> problems;
    bool settled = false;
    for (absl::Time deadline = absl::Now() + absl::Seconds(300); absl::Now() < deadline && !settled;) {
      absl::SleepFor(absl::Seconds(1));
      auto jobs = ListAll();
      if (!jobs.ok()) continue;
      final_states.clear();
      settled = true;
      for (const pb::Job& j : *jobs) {
        ++final_states[std::string(JobStateName(j.state()))];
        settled = settled && (j.state() == pb::JOB_STATE_SUCCEEDED || j.state() == pb::JOB_STATE_FAILED ||
                              j.state() == pb::JOB_STATE_CANCELLED);
      }
      if (settled) Check(*jobs, problems);
    }
    monitor_stop_ = true;
    monitor.join();
    if (!settled) problems.push_back("jobs did not all end within 300 s after the last fault");
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& v : overlaps_) problems.push_back(v);
    }
    for (auto& d : daemons_) {
      if (d) d->Signal(SIGTERM);
    }
    for (auto& d : daemons_) {
      if (d) d->Wait(absl::Seconds(15));
    }
    if (mounted_) umount2(data_mount_.c_str(), MNT_DETACH);
    nlohmann::json out = {{"store", options_.sqlite ? "sqlite" : "etcd"},
                          {"rounds", rounds_},
                          {"jobs_acknowledged", acknowledged_.size()},
                          {"cancels_acknowledged", cancelled_.size()},
                          {"faults", faults},
                          {"acknowledged_changes_lost", lost_},
                          {"jobs_run_twice_or_killed_by_control_plane", restarted_by_control_plane_},
                          {"overlapping_generations", overlaps_.size()},
                          {"restarts_after_agent_faults", restarts_after_agent_faults_},
                          {"refused_while_disk_full", refused_while_full_},
                          {"damaged_store_refused", damaged_store_refused_},
                          {"final_states", final_states},
                          {"process_samples", samples_.load()},
                          {"max_failover_seconds", max_failover_},
                          {"violations", problems},
                          {"seconds", absl::ToDoubleSeconds(absl::Now() - start)}};
    std::cout << out.dump(2) << "\n";
    return problems.empty() ? 0 : 1;
  }

 private:
  std::string DataDir(int i) const {
    return options_.sqlite ? (mounted_ ? data_mount_ : dir_.path() + "/data") + "/d"
                           : absl::StrCat(dir_.path(), "/d", i);
  }

  std::string Address(int i) const { return absl::StrCat("127.0.0.1:", daemon_ports_[static_cast<size_t>(i)]); }

  absl::Status StartDaemon(int i, bool recover = false) {
    std::vector<std::string> argv = {HETPOOLD_BIN,
                                     "--listen",
                                     Address(i),
                                     "--data-dir",
                                     DataDir(i),
                                     "--lease-ttl",
                                     "10s",
                                     "--orphan-grace",
                                     absl::StrCat(absl::ToInt64Seconds(options_.grace), "s"),
                                     "--rdzv-port-range",
                                     absl::StrCat(32000 + 100 * i, "-", 32099 + 100 * i),
                                     "--logs-dir",
                                     dir_.path() + "/logs",
                                     "--insecure"};
    if (!options_.sqlite) {
      for (const std::string& a :
           {std::string("--store"), "etcd://" + etcd_.endpoints(), std::string("--leader-lease"), std::string("2s")}) {
        argv.push_back(a);
      }
    }
    if (recover) argv.push_back("--recover");
    auto p = ChildProcess::Spawn(argv, absl::StrCat(dir_.path(), "/daemon", i, ".log"));
    if (!p.ok()) return p.status();
    daemons_[static_cast<size_t>(i)] = *std::move(p);
    return absl::OkStatus();
  }

  absl::Status StartAgent(int i) {
    std::vector<std::string> addresses;
    for (size_t d = 0; d < daemon_ports_.size(); ++d) addresses.push_back(Address(static_cast<int>(d)));
    const std::string name = i == 0 ? "node-a" : "node-b";
    std::vector<std::string> argv = {HETPOOL_AGENT_BIN,
                                     "--server",
                                     absl::StrJoin(addresses, ","),
                                     "--node-name",
                                     name,
                                     "--work-dir",
                                     dir_.path() + "/agent-" + name,
                                     "--backend",
                                     "sim",
                                     "--inventory",
                                     std::string(HETPOOL_SOURCE_DIR) + "/deploy/examples/" + name + ".json",
                                     "--inventory-refresh",
                                     "500ms",
                                     "--kill-grace",
                                     "2s"};
    for (const auto& flag : PlainAgentFlags()) argv.push_back(flag);
    auto p = ChildProcess::Spawn(argv, dir_.path() + "/agent-" + name + ".log");
    if (!p.ok()) return p.status();
    agents_[static_cast<size_t>(i)] = *std::move(p);
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> Submit(const std::string& request_id, const std::string& seconds = "3",
                                     absl::Duration timeout = absl::Seconds(60)) {
    pb::SubmitJobRequest req;
    pb::JobSpec& spec = *req.mutable_spec();
    spec.set_user("chaos");
    spec.add_command("/bin/sleep");
    spec.add_command(seconds);
    spec.set_working_dir("/tmp");
    spec.set_nnodes(1);
    spec.set_devices_per_node(1);
    spec.mutable_requirements()->add_vendors("nvidia");
    spec.set_max_restarts(10);
    (*spec.mutable_env())["HPCHAOS_MARK"] = dir_.path();
    req.set_request_id(request_id);
    std::vector<pb::JobService::Stub*> live;
    for (size_t i = 0; i < jobs_stubs_.size(); ++i) live.push_back(daemons_[i] ? jobs_stubs_[i].get() : nullptr);
    const absl::Time t0 = absl::Now();
    auto job = SubmitToAnyReplica(live, req, timeout);
    if (!job.ok()) return job.status();
    max_failover_ = std::max(max_failover_, absl::ToDoubleSeconds(absl::Now() - t0));
    return job->id();
  }

  // One ListJobs (first page of up to `page_size`) from the first replica that answers within
  // `timeout`, with its index.
  std::optional<std::pair<int, pb::ListJobsResponse>> FirstAnswer(int page_size, absl::Duration timeout) {
    for (size_t i = 0; i < jobs_stubs_.size(); ++i) {
      if (!daemons_[i]) continue;
      pb::ListJobsRequest req;
      req.set_page_size(page_size);
      pb::ListJobsResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
      ctx.AddMetadata("x-hetpool-forwarded", "1");  // followers refuse it: only the leader answers
      if (jobs_stubs_[i]->ListJobs(&ctx, req, &resp).ok()) return std::make_pair(static_cast<int>(i), std::move(resp));
    }
    return std::nullopt;
  }

  absl::StatusOr<std::vector<pb::Job>> ListAll() {
    auto answer = FirstAnswer(1000, absl::Seconds(2));
    if (!answer) return absl::UnavailableError("no replica answers");
    return std::vector<pb::Job>(answer->second.jobs().begin(), answer->second.jobs().end());
  }

  int LeaderIndex() {
    auto answer = FirstAnswer(1, absl::Milliseconds(500));
    return answer ? answer->first : -1;
  }

  std::string Restarted(absl::Status s, std::string what) { return s.ok() ? what : what + " (restart failed)"; }

  void KillDaemon(int i, int sig = SIGKILL) {
    auto& d = daemons_[static_cast<size_t>(i)];
    if (!d) return;
    d->Signal(sig);
    d->Wait(absl::Seconds(15));
    d.reset();
  }

  std::string InjectFault(const std::string& fault) {
    std::uniform_int_distribution<int> pick2(0, 1), pick3(0, 2), downtime_ms(1000, 3000);
    const absl::Duration down = absl::Milliseconds(downtime_ms(rng_));
    const int n = static_cast<int>(daemons_.size());
    std::string what = fault;
    if (fault == "kill-leader" || fault == "kill-follower") {
      int i = std::max(LeaderIndex(), 0);
      if (fault == "kill-follower") {
        if (n == 1) return "kill-follower (no follower)";
        i = (i + 1 + pick2(rng_)) % n;
      }
      KillDaemon(i);
      absl::SleepFor(down);
      what = Restarted(StartDaemon(i), fault);
    } else if (fault == "kill-agent") {
      const int i = pick2(rng_);
      agents_[static_cast<size_t>(i)]->Signal(SIGKILL);
      agents_[static_cast<size_t>(i)]->Wait(absl::Seconds(5));
      agents_[static_cast<size_t>(i)].reset();
      absl::SleepFor(down);
      what = Restarted(StartAgent(i), fault);
    } else if (fault == "kill-etcd") {
      if (options_.sqlite) return "kill-etcd (no etcd)";
      const int i = pick3(rng_);
      etcd_.member(static_cast<size_t>(i)).Kill(SIGKILL);
      absl::SleepFor(down);
      what = Restarted(etcd_.member(static_cast<size_t>(i)).Start(), fault);
    } else if (fault == "daemon-down") {
      for (int i = 0; i < n; ++i) KillDaemon(i);
      absl::SleepFor(options_.outage);  // the outage itself
      absl::Status s;
      for (int i = 0; i < n; ++i) s.Update(StartDaemon(i));
      what = Restarted(s, fault);
    } else if (fault == "frozen-agent") {
      what = FreezeAgent();
    } else if (fault == "disk-full") {
      what = FillDisk();
    } else if (fault == "store-damage") {
      what = DamageStore();
    }
    absl::SleepFor(absl::Seconds(1));
    return what;
  }

  // A long job on one agent, which is then frozen past its lease and the grace: its fence
  // watchdog must kill the job before the daemon starts its next generation elsewhere.
  std::string FreezeAgent() {
    const std::string request_id = absl::StrCat("chaos-long-", fault_log_.size());
    auto id = Submit(request_id, "600");
    if (!id.ok()) return "frozen-agent (submit failed)";
    acknowledged_[request_id] = *id;
    std::string node;
    for (absl::Time deadline = absl::Now() + absl::Seconds(60); node.empty() && absl::Now() < deadline;) {
      auto jobs = ListAll();
      if (jobs.ok()) {
        for (const auto& j : *jobs) {
          if (j.id() == *id && j.state() == pb::JOB_STATE_RUNNING) node = j.placement(0).node();
        }
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
    if (node.empty()) return "frozen-agent (long job never ran)";
    const size_t i = node == "node-a" ? 0 : 1;
    agents_[i]->Signal(SIGSTOP);
    absl::SleepFor(absl::Seconds(10) + options_.grace + absl::Seconds(5));
    agents_[i]->Signal(SIGCONT);
    CancelAcknowledged(*id);  // it would run for ten minutes
    return "frozen-agent";
  }

  // Fills the data dir's filesystem: submissions and a cancel are tried while it is full, and
  // whatever was acknowledged must survive; then space returns and the daemon must go on.
  std::string FillDisk() {
    if (!mounted_) return "disk-full (skipped: no tmpfs)";
    const std::string filler = data_mount_ + "/filler";
    {
      std::ofstream out(filler, std::ios::binary);
      const std::string block(1 << 20, 'f');
      while (out.write(block.data(), static_cast<std::streamsize>(block.size()))) {
      }
    }
    // The WAL may still hold room for a few pages: keep filling what it frees.
    for (int i = 0; i < 6; ++i) {
      const std::string request_id = absl::StrCat("chaos-full-", fault_log_.size(), "-", i);
      auto id = Submit(request_id, "3", absl::Seconds(3));
      if (id.ok()) {
        acknowledged_[request_id] = *id;  // stored after all: it must be there at the end
      } else {
        ++refused_while_full_;
      }
    }
    auto jobs = ListAll();
    if (jobs.ok()) {
      for (const auto& j : *jobs) {
        if (j.state() == pb::JOB_STATE_PENDING || j.state() == pb::JOB_STATE_RUNNING) {
          CancelAcknowledged(j.id());
          break;
        }
      }
    }
    absl::SleepFor(absl::Seconds(3));
    std::filesystem::remove(filler);
    return "disk-full";
  }

  // Stops hetpoold (SIGTERM: the WAL is folded into the file), damages the jobs index on disk,
  // and starts it: it must refuse, and start with --recover losing nothing.
  std::string DamageStore() {
    KillDaemon(0, SIGTERM);
    const std::string path = DataDir(0) + "/hetpool.db";
    int root = 0, page_size = 0;
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
      sqlite3_stmt* stmt = nullptr;
      sqlite3_prepare_v2(db, "SELECT rootpage FROM sqlite_master WHERE name='jobs_seq'", -1, &stmt, nullptr);
      if (sqlite3_step(stmt) == SQLITE_ROW) root = sqlite3_column_int(stmt, 0);
      sqlite3_finalize(stmt);
      sqlite3_prepare_v2(db, "PRAGMA page_size", -1, &stmt, nullptr);
      if (sqlite3_step(stmt) == SQLITE_ROW) page_size = sqlite3_column_int(stmt, 0);
      sqlite3_finalize(stmt);
    }
    sqlite3_close(db);
    if (root > 1 && page_size > 0) {
      std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
      file.seekp(static_cast<std::streamoff>(root - 1) * page_size + 12);
      const std::string junk(64, '\x5a');
      file.write(junk.data(), static_cast<std::streamsize>(junk.size()));
    }
    if (!StartDaemon(0).ok()) return "store-damage (start failed)";
    const std::optional<int> exit = daemons_[0]->Wait(absl::Seconds(15));
    damaged_store_refused_ = damaged_store_refused_ && exit.has_value() && *exit != 0;
    daemons_[0].reset();
    if (!exit) KillDaemon(0);
    return Restarted(StartDaemon(0, /*recover=*/true), "store-damage");
  }

  void CancelAcknowledged(const std::string& id) {
    for (size_t i = 0; i < jobs_stubs_.size(); ++i) {
      if (!daemons_[i]) continue;
      pb::CancelJobRequest req;
      req.set_job_id(id);
      pb::Job resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
      if (jobs_stubs_[i]->CancelJob(&ctx, req, &resp).ok()) {
        cancelled_.insert(id);
        return;
      }
    }
  }

  // Samples /proc: the generations of each job's live processes.
  void Monitor() {
    const std::string mark = "HPCHAOS_MARK=" + dir_.path();
    while (!monitor_stop_) {
      std::map<std::string, std::set<std::string>> generations;
      for (const MarkedProcess& p : MarkedProcesses(mark)) {
        auto job = p.env.find("HETPOOL_JOB_ID");
        auto generation = p.env.find("HETPOOL_GENERATION");
        if (job != p.env.end()) generations[job->second].insert(generation != p.env.end() ? generation->second : "");
      }
      ++samples_;
      for (const auto& [job, gens] : generations) {
        if (gens.size() < 2) continue;
        std::lock_guard<std::mutex> lock(mu_);
        overlaps_.insert(absl::StrCat(job, " ran generations ", absl::StrJoin(gens, " and "), " at once"));
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
  }

  void Check(const std::vector<pb::Job>& jobs, std::vector<std::string>& problems) {
    std::map<std::string, const pb::Job*> by_id;
    for (const pb::Job& j : jobs) by_id[j.id()] = &j;
    std::set<std::string> acked_ids;
    for (const auto& [request_id, id] : acknowledged_) {
      acked_ids.insert(id);
      auto it = by_id.find(id);
      if (it == by_id.end()) {
        problems.push_back("acknowledged job lost: " + id + " (" + request_id + ")");
        ++lost_;
      } else if (it->second->request_id() != request_id) {
        problems.push_back(id + " has request id " + it->second->request_id() + ", acknowledged for " + request_id);
      }
    }
    if (acked_ids.size() != acknowledged_.size()) problems.push_back("two request ids were acknowledged with one job");
    for (const std::string& id : cancelled_) {
      auto it = by_id.find(id);
      if (it != by_id.end() && it->second->state() != pb::JOB_STATE_CANCELLED) {
        problems.push_back("acknowledged cancel lost: " + id + " is " + std::string(JobStateName(it->second->state())));
        ++lost_;
      }
    }
    // Every restart is put down to the last fault that began before it.
    for (const pb::Job& j : jobs) {
      for (const auto& event : j.events()) {
        if (event.state() != pb::JOB_STATE_PENDING || event.reason() == "Submitted" ||
            event.reason() == "Unschedulable" || event.reason() == "Unresolvable") {
          continue;
        }
        const absl::Time when = FromProtoTime(event.time());
        std::string fault = "before any fault";
        for (const auto& [start, kind] : fault_log_) {
          if (start <= when) fault = kind;
        }
        if (RestartsNothing(fault)) {
          ++restarted_by_control_plane_;
          problems.push_back(
              absl::StrCat(j.id(), " restarted (", event.reason(), ": ", event.message(), ") after ", fault));
        } else {
          ++restarts_after_agent_faults_;
        }
      }
    }
    for (const pb::Job& j : jobs) {
      if (!acked_ids.contains(j.id())) problems.push_back("job nobody acknowledged: " + j.id());
      if (j.state() == pb::JOB_STATE_FAILED && j.reason().empty())
        problems.push_back(j.id() + " failed without a reason");
    }
  }

  int Fail(const absl::Status& s) {
    std::cerr << "chaos: " << s << "\n";
    return 2;
  }

  ChaosOptions options_;
  const int rounds_;
  const int jobs_per_round_;
  std::string data_mount_;
  bool mounted_ = false;
  std::vector<std::pair<absl::Time, std::string>> fault_log_;  // when each fault began
  std::set<std::string> cancelled_;                            // acknowledged cancels
  int lost_ = 0;
  int restarted_by_control_plane_ = 0;
  int restarts_after_agent_faults_ = 0;
  int refused_while_full_ = 0;
  bool damaged_store_refused_ = true;
  std::mt19937_64 rng_;
  TempDir dir_;
  EtcdCluster etcd_;
  std::vector<int> daemon_ports_;
  std::vector<std::unique_ptr<pb::JobService::Stub>> jobs_stubs_;
  std::vector<std::unique_ptr<ChildProcess>> daemons_;
  std::vector<std::unique_ptr<ChildProcess>> agents_;
  std::map<std::string, std::string> acknowledged_;  // request id -> job id
  double max_failover_ = 0;
  std::atomic<bool> monitor_stop_{false};
  std::atomic<int64_t> samples_{0};
  std::mutex mu_;
  std::set<std::string> overlaps_;
};

}  // namespace
}  // namespace hetpool::testing

int main(int argc, char** argv) {
  hetpool::testing::ChaosOptions options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--rounds")
      options.rounds = std::stoi(value);
    else if (flag == "--seed")
      options.seed = std::stoull(value);
    else if (flag == "--jobs-per-round")
      options.jobs_per_round = std::stoi(value);
    else if (flag == "--store")
      options.sqlite = value == "sqlite";
    else if (flag == "--faults")
      options.faults = absl::StrSplit(value, ',', absl::SkipEmpty());
    else if (flag == "--outage")
      options.outage = absl::Seconds(std::stoi(value));
    else if (flag == "--grace")
      options.grace = absl::Seconds(std::stoi(value));
    else {
      std::cerr << "usage: chaos [--rounds 20] [--seed 1] [--jobs-per-round 3] [--store etcd|sqlite] "
                   "[--faults kill-leader,...] [--outage 60] [--grace 90]\n";
      return 2;
    }
  }
  return hetpool::testing::Chaos(std::move(options)).Run();
}
