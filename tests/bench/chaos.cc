// chaos: a bounded soak of the highly available control plane. 3 etcd members, 3 hetpoold
// replicas on them, 2 simulated agents that know every replica. Each round submits a few short
// jobs (retrying across replicas with a request id until one acknowledges), then kills at random
// one of: the leading daemon, another daemon, an agent, an etcd member (SIGKILL), and restarts
// it 1-3 s later. A monitor samples /proc every 100 ms for the jobs' processes. At the end it
// checks the invariants:
//   - no acknowledged job lost, none duplicated (one job per request id, and no other jobs);
//   - never two generations of one job running at the same time;
//   - every job ends (SUCCEEDED, or FAILED with a reason) once the faults stop.
// Figures: docs/benchmarks.md.      chaos [--rounds 20] [--seed 1] [--jobs-per-round 3]
#include <signal.h>

#include <atomic>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hetpool/v1/cluster.grpc.pb.h"
#include "hetpool/v1/job.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "src/common/convert.h"
#include "tests/testing/cluster_harness.h"
#include "tests/testing/etcd_process.h"
#include "tests/testing/temp_dir.h"

namespace hetpool::testing {
namespace {

class Chaos {
 public:
  Chaos(int rounds, uint64_t seed, int jobs_per_round)
      : rounds_(rounds), jobs_per_round_(jobs_per_round), rng_(seed), etcd_(dir_.path(), 3) {}

  int Run() {
    const absl::Time start = absl::Now();
    if (absl::Status s = etcd_.Start(); !s.ok()) return Fail(s);
    for (int i = 0; i < 3; ++i) {
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
      const std::string fault = InjectFault();
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
        settled = settled && (j.state() == pb::JOB_STATE_SUCCEEDED || j.state() == pb::JOB_STATE_FAILED);
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
    nlohmann::json out = {{"rounds", rounds_},
                          {"jobs_acknowledged", acknowledged_.size()},
                          {"faults", faults},
                          {"final_states", final_states},
                          {"process_samples", samples_.load()},
                          {"max_failover_seconds", max_failover_},
                          {"violations", problems},
                          {"seconds", absl::ToDoubleSeconds(absl::Now() - start)}};
    std::cout << out.dump(2) << "\n";
    return problems.empty() ? 0 : 1;
  }

 private:
  std::string Address(int i) const { return absl::StrCat("127.0.0.1:", daemon_ports_[static_cast<size_t>(i)]); }

  absl::Status StartDaemon(int i) {
    auto p = ChildProcess::Spawn(
        {HETPOOLD_BIN, "--listen", Address(i), "--data-dir", absl::StrCat(dir_.path(), "/d", i), "--store",
         "etcd://" + etcd_.endpoints(), "--leader-lease", "2s", "--lease-ttl", "10s", "--rdzv-port-range",
         absl::StrCat(32000 + 100 * i, "-", 32099 + 100 * i), "--insecure"},
        absl::StrCat(dir_.path(), "/daemon", i, ".log"));
    if (!p.ok()) return p.status();
    daemons_[static_cast<size_t>(i)] = *std::move(p);
    return absl::OkStatus();
  }

  absl::Status StartAgent(int i) {
    std::vector<std::string> addresses;
    for (int d = 0; d < 3; ++d) addresses.push_back(Address(d));
    const std::string name = i == 0 ? "node-a" : "node-b";
    std::vector<std::string> argv = {HETPOOL_AGENT_BIN, "--server", absl::StrJoin(addresses, ","), "--node-name", name,
                                     "--work-dir", dir_.path() + "/agent-" + name, "--backend", "sim", "--inventory",
                                     std::string(HETPOOL_SOURCE_DIR) + "/deploy/examples/" + name + ".json",
                                     "--inventory-refresh", "500ms", "--kill-grace", "2s"};
    for (const auto& flag : PlainAgentFlags()) argv.push_back(flag);
    auto p = ChildProcess::Spawn(argv, dir_.path() + "/agent-" + name + ".log");
    if (!p.ok()) return p.status();
    agents_[static_cast<size_t>(i)] = *std::move(p);
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> Submit(const std::string& request_id) {
    pb::SubmitJobRequest req;
    pb::JobSpec& spec = *req.mutable_spec();
    spec.set_user("chaos");
    spec.add_command("/bin/sleep");
    spec.add_command("3");
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
    auto job = SubmitToAnyReplica(live, req, absl::Seconds(60));
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

  std::string InjectFault() {
    std::uniform_int_distribution<int> kind(0, 3), pick3(0, 2), pick2(0, 1);
    std::uniform_int_distribution<int> downtime_ms(1000, 3000);
    const int k = kind(rng_);
    const absl::Duration down = absl::Milliseconds(downtime_ms(rng_));
    std::string what;
    if (k == 0 || k == 1) {
      int i = LeaderIndex();
      if (k == 1 || i < 0) i = (i + 1 + pick2(rng_)) % 3;  // a follower
      what = k == 0 ? "kill leading hetpoold" : "kill a following hetpoold";
      daemons_[static_cast<size_t>(i)]->Signal(SIGKILL);
      daemons_[static_cast<size_t>(i)]->Wait(absl::Seconds(5));
      daemons_[static_cast<size_t>(i)].reset();
      absl::SleepFor(down);
      if (!StartDaemon(i).ok()) what += " (restart failed)";
    } else if (k == 2) {
      const int i = pick2(rng_);
      what = "kill an agent";
      agents_[static_cast<size_t>(i)]->Signal(SIGKILL);
      agents_[static_cast<size_t>(i)]->Wait(absl::Seconds(5));
      agents_[static_cast<size_t>(i)].reset();
      absl::SleepFor(down);
      if (!StartAgent(i).ok()) what += " (restart failed)";
    } else {
      const int i = pick3(rng_);
      what = "kill an etcd member";
      etcd_.member(static_cast<size_t>(i)).Kill(SIGKILL);
      absl::SleepFor(down);
      if (!etcd_.member(static_cast<size_t>(i)).Start().ok()) what += " (restart failed)";
    }
    absl::SleepFor(absl::Seconds(1));
    return what;
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
      } else if (it->second->request_id() != request_id) {
        problems.push_back(id + " has request id " + it->second->request_id() + ", acknowledged for " + request_id);
      }
    }
    if (acked_ids.size() != acknowledged_.size()) problems.push_back("two request ids were acknowledged with one job");
    for (const pb::Job& j : jobs) {
      if (!acked_ids.contains(j.id())) problems.push_back("job nobody acknowledged: " + j.id());
      if (j.state() == pb::JOB_STATE_FAILED && j.reason().empty()) problems.push_back(j.id() + " failed without a reason");
    }
  }

  int Fail(const absl::Status& s) {
    std::cerr << "chaos: " << s << "\n";
    return 2;
  }

  const int rounds_;
  const int jobs_per_round_;
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
  int rounds = 20, jobs_per_round = 3;
  uint64_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--rounds") rounds = std::stoi(value);
    else if (flag == "--seed") seed = std::stoull(value);
    else if (flag == "--jobs-per-round") jobs_per_round = std::stoi(value);
    else {
      std::cerr << "usage: chaos [--rounds 20] [--seed 1] [--jobs-per-round 3]\n";
      return 2;
    }
  }
  return hetpool::testing::Chaos(rounds, seed, jobs_per_round).Run();
}
