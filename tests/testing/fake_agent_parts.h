// Fakes of the agent's two seams to the outside (process_spawner.h, daemon_link.h) and a clock
// tests move by hand: with them the agent's parts, the session included, run in a unit test
// without forking a process or opening a socket.
#pragma once

#include <signal.h>

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "src/agent/daemon_link.h"
#include "src/agent/process_spawner.h"

namespace hetpool::testing {

// A clock that moves only when told.
class ManualClock {
 public:
  absl::Time Now() const {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  MonotonicClock AsClock() {
    return [this] { return Now(); };
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ = absl::FromUnixSeconds(1'000'000);
};

// Starts nothing: each Spawn gets the next pid and is noted with its argv, environment and the
// admit's answer; a process "exits" when the test says so, or when signalled (128 + signal, the
// group's leader ignoring SIGTERM when told to).
class FakeSpawner : public agent::ProcessSpawner {
 public:
  struct Process {
    std::vector<std::string> argv;
    std::map<std::string, std::string> env;
    std::string start_dir;
    std::vector<int> signals;
    std::optional<int> wait_status;  // set: exited
    bool reaped = false;
  };

  agent::Spawned Spawn(const agent::ChildPlan& plan, const std::function<absl::Status(pid_t)>& admit) override {
    absl::MutexLock lock(&mu_);
    if (!fail_with.empty()) return agent::Spawned{.error = fail_with};
    const pid_t pid = next_pid_++;
    Process p;
    for (char* const* a = plan.exec->argv(); *a != nullptr; ++a) p.argv.emplace_back(*a);
    for (char* const* e = plan.exec->envp(); *e != nullptr; ++e) {
      const std::string var = *e;
      const size_t eq = var.find('=');
      p.env[var.substr(0, eq)] = var.substr(eq + 1);
    }
    p.start_dir = plan.start_dir != nullptr ? plan.start_dir : "";
    agent::Spawned spawned{.pid = pid};
    if (!admit(pid).ok()) {
      spawned.stopped = agent::ChildError{agent::Stage::kNotRecorded, 0};
    } else if (stop_at) {
      spawned.stopped = *stop_at;
    }
    processes_[pid] = std::move(p);
    return spawned;
  }
  std::optional<int> Reap(pid_t pid) override {
    absl::MutexLock lock(&mu_);
    Process& p = processes_.at(pid);
    if (!p.wait_status || p.reaped) return std::nullopt;
    p.reaped = true;
    return p.wait_status;
  }
  void SignalGroup(pid_t pgid, int signal) override {
    absl::MutexLock lock(&mu_);
    Process& p = processes_.at(pgid);
    p.signals.push_back(signal);
    if (p.wait_status) return;
    if (signal == SIGKILL || (signal == SIGTERM && !ignore_sigterm)) p.wait_status = signal;  // WTERMSIG
  }
  std::vector<int> RanksInGroup(pid_t, int procs) override { return ranks_ready ? Ranks(procs) : std::vector<int>{}; }
  std::vector<int> RanksOf(const std::vector<pid_t>&, int procs) override { return RanksInGroup(0, procs); }

  // The test's side.
  void Exit(pid_t pid, int code) {
    absl::MutexLock lock(&mu_);
    processes_.at(pid).wait_status = code << 8;
  }
  Process Get(pid_t pid) const {
    absl::MutexLock lock(&mu_);
    return processes_.at(pid);
  }
  size_t spawned() const {
    absl::MutexLock lock(&mu_);
    return processes_.size();
  }
  pid_t last_pid() const {
    absl::MutexLock lock(&mu_);
    return next_pid_ - 1;
  }

  std::string fail_with;                     // Spawn fails (no process) saying this
  std::optional<agent::ChildError> stop_at;  // the child stops before exec here
  bool ignore_sigterm = false;
  bool ranks_ready = false;

 private:
  static std::vector<int> Ranks(int procs) {
    std::vector<int> ranks;
    for (int i = 0; i < procs; ++i) ranks.push_back(i);
    return ranks;
  }
  mutable absl::Mutex mu_;
  pid_t next_pid_ = 4'000'000;  // above any real pid_max default, so no real process is named
  std::map<pid_t, Process> processes_;
};

// A daemon in memory: each address answers registration as the test set it (ok, or a status),
// records every heartbeat and log chunk, and hands the session the orders the test pushes.
class FakeDaemon : public agent::DaemonDialer {
 public:
  struct Address {
    grpc::Status answer = grpc::Status::OK;  // to Register
    bool connected = true;                   // DaemonLink::Connected
  };

  std::unique_ptr<agent::DaemonLink> Dial(const std::string& address) override;
  void Wait(const std::string* address, absl::Duration patience, absl::Duration period,
            const std::function<bool()>& tick) override {
    (void)period;
    {
      absl::MutexLock lock(&mu_);
      waits_.push_back({address != nullptr ? *address : "", patience});
    }
    tick();  // time is the test's: one tick stands for the wait
  }

  void SetAddress(const std::string& address, Address a) {
    absl::MutexLock lock(&mu_);
    addresses_[address] = std::move(a);
  }
  void PushOrders(hetpool::v1::Orders orders) {
    absl::MutexLock lock(&mu_);
    orders_.push_back(std::move(orders));
  }
  void EndStream() {
    absl::MutexLock lock(&mu_);
    stream_ended_ = true;
  }
  std::vector<std::string> registrations() const {
    absl::MutexLock lock(&mu_);
    return registrations_;
  }
  std::vector<std::pair<std::string, absl::Duration>> waits() const {
    absl::MutexLock lock(&mu_);
    return waits_;
  }
  std::optional<hetpool::v1::HeartbeatRequest> last_heartbeat() const {
    absl::MutexLock lock(&mu_);
    return heartbeats_.empty() ? std::nullopt : std::optional(heartbeats_.back());
  }
  size_t heartbeats() const {
    absl::MutexLock lock(&mu_);
    return heartbeats_.size();
  }
  std::string log_of(const std::string& job) const {
    absl::MutexLock lock(&mu_);
    auto it = logs_.find(job);
    return it == logs_.end() ? "" : it->second;
  }
  int64_t lease_ttl_ms = 15'000;
  int64_t orphan_grace_ms = 60'000;

 private:
  friend class FakeLink;
  mutable absl::Mutex mu_;
  std::map<std::string, Address> addresses_;
  std::vector<std::string> registrations_;
  std::vector<std::pair<std::string, absl::Duration>> waits_;
  std::vector<hetpool::v1::HeartbeatRequest> heartbeats_;
  std::map<std::string, std::string> logs_;
  std::deque<hetpool::v1::Orders> orders_;
  bool stream_ended_ = false;
};

class FakeLink : public agent::DaemonLink {
 public:
  FakeLink(FakeDaemon* daemon, std::string address) : daemon_(daemon), address_(std::move(address)) {}
  grpc::Status Register(const hetpool::v1::RegisterRequest&, hetpool::v1::RegisterResponse* resp) override {
    absl::MutexLock lock(&daemon_->mu_);
    daemon_->registrations_.push_back(address_);
    const grpc::Status answer = daemon_->addresses_[address_].answer;
    if (!answer.ok()) return answer;
    daemon_->stream_ended_ = false;
    resp->set_session_id(absl::StrCat("s", daemon_->registrations_.size()));
    resp->set_lease_ttl_ms(daemon_->lease_ttl_ms);
    resp->set_orphan_grace_ms(daemon_->orphan_grace_ms);
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(const hetpool::v1::HeartbeatRequest& req, hetpool::v1::HeartbeatResponse*) override {
    absl::MutexLock lock(&daemon_->mu_);
    daemon_->heartbeats_.push_back(req);
    return grpc::Status::OK;
  }
  grpc::Status PushLogs(const hetpool::v1::PushLogsRequest& req, hetpool::v1::PushLogsResponse* resp) override {
    absl::MutexLock lock(&daemon_->mu_);
    std::string& log = daemon_->logs_[req.job_id()];
    if (req.offset() != log.size()) return grpc::Status(grpc::StatusCode::OUT_OF_RANGE, "offset");
    log += req.data();
    resp->set_next_offset(log.size());
    return grpc::Status::OK;
  }
  void FollowOrders(const hetpool::v1::StreamOrdersRequest&) override {}
  agent::OrdersUpdate AwaitOrders(absl::Duration patience) override {
    absl::MutexLock lock(&daemon_->mu_);
    FakeDaemon* d = daemon_;
    auto ready = [d]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(d->mu_) { return !d->orders_.empty() || d->stream_ended_; };
    daemon_->mu_.AwaitWithTimeout(absl::Condition(&ready), patience);
    agent::OrdersUpdate update;
    if (!daemon_->orders_.empty()) {
      update.orders = std::move(daemon_->orders_.front());
      daemon_->orders_.pop_front();
    }
    update.ended = daemon_->stream_ended_;
    return update;
  }
  bool Connected() override {
    absl::MutexLock lock(&daemon_->mu_);
    return daemon_->addresses_[address_].connected;
  }

 private:
  FakeDaemon* daemon_;
  std::string address_;
};

inline std::unique_ptr<agent::DaemonLink> FakeDaemon::Dial(const std::string& address) {
  return std::make_unique<FakeLink>(this, address);
}

}  // namespace hetpool::testing
