// Session: the agent's conversation with hetpoold. Registers the node (inventory + every local
// process), follows the order stream, reconciles the Runner against it, pushes logs, and
// heartbeats the full process status. On a lost session (daemon restart, lapsed lease) it
// registers again; job processes keep running throughout.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "drivers/backend_factory.h"
#include "drivers/device_backend.h"
#include "drivers/inventory_tracker.h"
#include "hetpool/v1/agent.grpc.pb.h"
#include "grpcpp/security/credentials.h"
#include "src/agent/job_sandbox.h"
#include "src/agent/run_dir_janitor.h"
#include "src/agent/runner.h"
#include "src/common/monotonic_clock.h"

namespace hetpool::agent {

struct SessionOptions {
  std::vector<std::string> servers;  // tried in turn
  std::string node_name;
  std::string address = "127.0.0.1";
  std::string work_dir;
  std::string torchrun_path;
  std::string job_path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  absl::Duration kill_grace = absl::Seconds(10);
  absl::Duration inventory_refresh = absl::Seconds(5);
  drivers::CollectOptions collect;  // spec table, torch devices, sysfs root
  std::map<std::string, std::string> labels;  // --label k=v
  // Fencing: with no hetpoold reachable for this long, stop every job process, since the daemon
  // may then give this node's jobs to others. nullopt = the orphan grace the daemon announced at
  // registration (minutes by default: jobs ride out a control-plane outage), else at most that;
  // zero = never (jobs outlive any outage, at the risk of running beside their restarted copies).
  std::optional<absl::Duration> fence_after;
  // The separate process that enforces the same deadline when this one cannot (frozen, killed).
  FenceWatchdog* watchdog = nullptr;
  // TLS with the node certificate (or plaintext with --insecure). Set by main once signals are
  // blocked: making credentials starts gRPC's threads.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  SandboxOptions sandbox;  // job directories and the accounts jobs run as
  // A cgroup per job generation (job_cgroup.h), when set; each is held to these pids.
  Confinement* confinement = nullptr;
  uint64_t job_pids_max = 32768;
  // Jobs in container images start through it (container_runtime.h), when the node has one.
  ContainerRuntime* container_runtime = nullptr;
  // The work dir's bounds (run_dir_janitor.h): ended generations' directories go after
  // `run_dir_retention`; a running one past `job_disk_limit_mib` (0: none) is stopped.
  absl::Duration run_dir_retention = absl::Hours(72);
  uint64_t job_disk_limit_mib = 0;
};

// What the agent's metrics endpoint reports: the last discovered inventory and the job processes.
struct NodeTelemetry {
  hetpool::v1::NodeInventory inventory;
  int job_processes = 0;
  bool registered = false;
};

class Session {
 public:
  Session(SessionOptions options, std::vector<std::unique_ptr<drivers::DeviceBackend>> backends);
  ~Session();
  // Runs until *stop becomes true, then stops every job process and returns. Once *drain is
  // true (may be null) the node takes no new work (heartbeats say so, the daemon drains it) and
  // Run returns when no job process is left.
  void Run(const std::atomic<bool>* stop, const std::atomic<bool>* drain = nullptr);
  // Safe from any thread (the metrics endpoint's).
  NodeTelemetry Telemetry() const;

 private:
  struct Connection;
  absl::StatusOr<hetpool::v1::NodeInventory> Inventory();
  // Every process the vendor libraries list on the cards now, by the cards' ids (Runner's
  // card_processes); empty when no backend can tell.
  std::vector<std::pair<std::string, CardProcess>> CardProcesses();
  // "nvidia0: pid 4242 (uid 0, python3) holds 2658 MiB" for those of `device_ids` that a process
  // of no running job holds now (card_holders.h), "" when they are clean.
  std::string DirtyCards(const std::vector<std::string>& device_ids);
  // Registers over ChannelToServer(); on failure, `unreachable_` says whether the daemon could
  // not be reached at all (then the wait before the next try ends as soon as it can be).
  bool RegisterOnce(const hetpool::v1::NodeInventory& inventory);
  // The channel to the daemon address the next registration tries (MakeDaemonChannel): kept
  // while that address does not change, so that the wait for it to connect and the registration
  // share one connection.
  std::shared_ptr<grpc::Channel> ChannelToServer();
  // The wait after a failed registration: `backoff`, reaping and fencing meanwhile, or less when
  // the daemon was unreachable and its address now connects (WaitForDaemon).
  void WaitToRegister(absl::Duration backoff, const std::atomic<bool>* stop);
  // One registered session; returns when it is lost or *stop is set.
  void Serve(const std::atomic<bool>* stop, const std::atomic<bool>* drain);
  // Draining and done: no process left, every exit reported and acknowledged by the daemon.
  bool Drained(const std::atomic<bool>* drain) const { return drain != nullptr && drain->load() && runner_.Empty(); }
  void Reconcile(const hetpool::v1::Orders& orders);
  LaunchSpec ToLaunchSpec(const hetpool::v1::LaunchOrder& order) const;
  // Pushes new log bytes; returns true if some exited process is now fully pushed.
  bool PushLogs();
  google::protobuf::RepeatedPtrField<hetpool::v1::ProcessStatus> ProcessReports();
  // Stops every job process once no daemon has answered for fence_after_ (once per outage).
  void FenceIfCutOff();
  // Sends `data` at the record's pushed offset; false when the daemon could not take it (retry).
  bool PushChunk(const Runner::Key& key, ProcessRecord& r, absl::string_view data);
  // A daemon answered: the fence moves to fence_after_ from now, here and in the watchdog.
  void Contacted(absl::Time when);
  // Why this node must take no new work now (HeartbeatRequest.fault), or "".
  std::string Fault() const;

  mutable absl::Mutex telemetry_mu_;
  NodeTelemetry telemetry_ ABSL_GUARDED_BY(telemetry_mu_);

  const SessionOptions options_;
  std::vector<std::unique_ptr<drivers::DeviceBackend>> backends_;
  bool simulated_ = false;
  bool lists_card_processes_ = false;  // a backend that is not simulated may list card processes
  ProcessLedger ledger_;  // before runner_, which records into it
  Runner runner_;
  // Why a launch must wait before it may start ("" when it need not): its account still runs
  // another user's job, or a process of no job holds one of its cards.
  std::string WhyHeld(const LaunchSpec& spec);
  // Sweeps the work dir once a minute (KeepWorkDirInBounds).
  void KeepWorkDirInBounds();
  absl::Time next_work_dir_sweep_ = absl::InfinitePast();
  size_t server_index_ = 0;
  std::shared_ptr<grpc::Channel> channel_;  // to servers[channel_server_]; see ChannelToServer
  size_t channel_server_ = 0;
  bool unreachable_ = false;  // the last registration failed without reaching a daemon
  bool leader_named_ = false;  // the last registration was refused by a follower naming the leader
  size_t leader_hops_ = 0;     // registrations in a row sent to a named leader without a wait
  std::unique_ptr<Connection> conn_;
  std::string session_id_;
  drivers::InventoryTracker tracker_;
  hetpool::v1::NodeInventory reported_inventory_;  // what the daemon has, to notice changes
  std::optional<hetpool::v1::NodeInventory> unreported_inventory_;  // to send with the next heartbeat
  std::string last_inventory_error_;
  uint64_t applied_version_ = 0;
  absl::Time last_contact_ = MonotonicNow();  // the last registration or heartbeat a daemon answered
  absl::Duration fence_after_ = absl::ZeroDuration();  // known once a daemon has announced its lease
  absl::Duration lease_ttl_ = absl::ZeroDuration();    // the daemon's, announced at registration
  absl::Duration heartbeat_every_ = absl::Seconds(1);  // likewise (HeartbeatPeriod in session.cc)
  bool fenced_ = false;
  std::string reported_fault_;
  // Launches held back because their account's uid still runs another user's processes: the
  // last orders are applied again each loop until none is held (Runner::UidHolder).
  std::optional<hetpool::v1::Orders> held_orders_;
  struct HeldLaunch {
    std::string why;  // ProcessStatus.waiting
    std::vector<std::string> device_ids;
  };
  std::map<Runner::Key, HeldLaunch> held_;
  // Jobs get a /tmp of their own (private_tmp.h): confined, and no job dir holds /tmp itself.
  bool private_tmp_ = false;  // the fault the daemon last accepted a heartbeat with
};

}  // namespace hetpool::agent
