// Session: the agent's conversation with hetpoold, and the facade that wires the agent's parts.
// Registers the node (inventory + every local process) through the registration client, follows
// the order stream, reconciles the runner against it (launch specs from the builder, through the
// launch gate), ships logs, and heartbeats the full process status. On a lost session (daemon
// restart, lapsed lease) it registers again; job processes keep running throughout, until the
// fence timer says the daemon may have given them away.
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
#include "hetpool/v1/agent.pb.h"
#include "grpcpp/security/credentials.h"
#include "src/agent/card_process_query.h"
#include "src/agent/daemon_link.h"
#include "src/agent/fence_timer.h"
#include "src/agent/health_check.h"
#include "src/agent/job_sandbox.h"
#include "src/agent/launch_gate.h"
#include "src/agent/launch_spec_builder.h"
#include "src/agent/log_shipper.h"
#include "src/agent/registration_client.h"
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
  std::string python_path;  // for direct Python jobs ("": they start under torchrun)
  std::string job_path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  absl::Duration kill_grace = absl::Seconds(10);
  absl::Duration inventory_refresh = absl::Seconds(5);
  drivers::CollectOptions collect;            // spec table, torch devices, sysfs root
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
  // Seams for tests: the clock deadlines are kept on, how the daemon is reached (null: over gRPC
  // with `credentials`) and what starts job processes (null: fork and exec).
  MonotonicClock clock = MonotonicNow;
  DaemonDialer* dialer = nullptr;
  ProcessSpawner* spawner = nullptr;
  // The node's health check (health_check.h); its failure is reported as the node's fault.
  HealthCheckOptions health_check;
  bool adapt = true;  // the launch adapter (launch_adapter.h); --adapt=false turns it off here
  // How long torchrun may go on after logging a worker's failure before the agent stops the
  // generation (Runner::StopLingering).
  absl::Duration failed_rank_grace = absl::Seconds(10);
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
  absl::StatusOr<hetpool::v1::NodeInventory> Inventory();
  // What registration and each heartbeat report of the launches and processes.
  google::protobuf::RepeatedPtrField<hetpool::v1::ProcessStatus> ProcessReports() const;
  // One try at registering; on success link_ is the session's and the orders are followed.
  bool RegisterOnce(const hetpool::v1::NodeInventory& inventory);
  // One registered session; returns when it is lost or *stop is set.
  void Serve(const std::atomic<bool>* stop, const std::atomic<bool>* drain);
  // Serve's steps: apply new (or held) orders; refresh the inventory when due; heartbeat. Each
  // returns whether the daemon should hear at once; Heartbeat false when the session is lost.
  bool ApplyOrders(std::optional<hetpool::v1::Orders> orders);
  bool RefreshInventoryIfDue();
  bool Heartbeat(bool draining);
  // Draining and done: no process left, every exit reported and acknowledged by the daemon.
  bool Drained(const std::atomic<bool>* drain) const { return drain != nullptr && drain->load() && runner_.Empty(); }
  void Reconcile(const hetpool::v1::Orders& orders);
  // --preflight: holds `spec` while the node's health check runs for it, then notes the pass or
  // refuses the launch as the node's fault.
  void ApplyPreflight(LaunchSpec& spec);
  LaunchNodeFacts NodeFacts() const;
  ChunkAnswer SendLogChunk(const Runner::Key& key, uint64_t offset, absl::string_view data);
  // Stops every job process once no daemon has answered for the fence deadline (once per outage).
  void FenceIfCutOff();
  // Why this node must take no new work now (HeartbeatRequest.fault), or "".
  std::string Fault() const;
  // Sweeps the work dir once a minute (run_dir_janitor.h).
  void KeepWorkDirInBounds();
  // Stops what a killed predecessor left running, before the daemon hears from this agent.
  void StopLeftovers();

  mutable absl::Mutex telemetry_mu_;
  NodeTelemetry telemetry_ ABSL_GUARDED_BY(telemetry_mu_);

  const SessionOptions options_;
  MonotonicClock clock_;
  // Set from a backend's health watch (DeviceBackend::WatchHealth): discover again at once. Shared,
  // as the watch's thread may outlive this object by the backends' teardown.
  std::shared_ptr<std::atomic<bool>> health_changed_ = std::make_shared<std::atomic<bool>>(false);
  std::vector<std::unique_ptr<drivers::DeviceBackend>> backends_;
  bool simulated_ = false;
  drivers::InventoryTracker tracker_;
  CardProcessQuery card_processes_;
  ProcessLedger ledger_;  // before runner_, which records into it
  Runner runner_;
  LaunchGate gate_;
  LogShipper shipper_;
  std::unique_ptr<DaemonDialer> own_dialer_;  // when options_.dialer is null
  RegistrationClient registration_;
  FenceTimer fence_;
  HealthCheck health_check_;
  std::unique_ptr<DaemonLink> link_;  // the registered session's
  std::string session_id_;
  hetpool::v1::NodeInventory reported_inventory_;  // what the daemon has, to notice changes
  std::string adapter_dir_;                        // the launch adapter's directory; "" when it could not be written
  std::vector<std::string> device_ids_;            // the cards of the last discovery (a health check may name them)
  std::optional<hetpool::v1::NodeInventory> unreported_inventory_;  // to send with the next heartbeat
  std::string last_inventory_error_;
  absl::Time last_inventory_;
  absl::Time last_heartbeat_;
  uint64_t applied_version_ = 0;
  absl::Duration heartbeat_every_ = absl::Seconds(1);  // the daemon's suggestion (HeartbeatPeriod)
  std::string reported_fault_;                         // the fault the daemon last accepted a heartbeat with
  absl::Time next_work_dir_sweep_ = absl::InfinitePast();
  // Jobs get a /tmp of their own (private_tmp.h): confined, and no job dir holds /tmp itself.
  bool private_tmp_ = false;
};

}  // namespace hetpool::agent
