// Wiring of hetpoold: store, cluster state, services and the gRPC server, owned in dependency
// order so destruction is the shutdown order. main.cc only parses flags and waits for a signal.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/server.h"
#include "scheduler/placement_policy.h"
#include "src/daemon/logs/log_store.h"
#include "src/daemon/ha/leadership.h"
#include "src/common/tls.h"
#include "src/daemon/metrics/daemon_metrics.h"
#include "src/daemon/services/agent_service.h"
#include "src/daemon/services/api_guard.h"
#include "src/daemon/services/cluster_service.h"
#include "src/daemon/services/job_service.h"
#include "src/daemon/services/planner_service.h"
#include "src/daemon/state/cluster_state.h"
#include "src/daemon/web/web_server.h"
#include "src/daemon/store/store.h"

namespace hetpool::daemon {

struct DaemonOptions {
  std::string listen = "127.0.0.1:7070";  // port 0 picks a free one: read port()
  std::string data_dir;
  std::string store;     // "" = SQLite in data_dir; "etcd://host:port[,host:port...]" = etcd
  bool recover = false;  // SQLite: rebuild a damaged store from its readable rows (sqlite_recovery.h)
  // With etcd: this replica's address for clients (default: the listen host and bound port),
  // and the leader lease (how long a dead leader keeps the lead).
  std::string advertise;
  absl::Duration leader_lease = absl::Seconds(2);
  ClusterOptions cluster;
  planner::PriceTable prices;     // --prices: currency per card-hour per class, utilisation overrides
  std::string scheduler_profile;  // --scheduler-profile: JSON text; empty = the built-in default
  // Security (docs/security.md): TLS files and the token file, or insecure (plaintext, no checks).
  TlsFiles tls;
  bool insecure = false;
  std::string token_file;
  std::string audit_log;       // "" = <data_dir>/audit.log
  AuditLogOptions audit;       // rotation
  LogStoreOptions logs;        // the size cap of each job's node logs
  std::string logs_dir;        // "" = <data_dir>/logs; with several replicas, one every replica mounts
  double submit_rate = 50;     // SubmitJob per user per second (0 = unlimited) ...
  double submit_burst = 200;   // ... in bursts of up to this many
  CallLimits call_limits;      // calls and streams in flight per user and connection (0: no cap)
  std::string metrics_listen;  // host:port for Prometheus; "" = no metrics endpoint
  std::string http_listen;     // host:port for the web dashboard; "" = none
};

class DaemonServer {
 public:
  static absl::StatusOr<std::unique_ptr<DaemonServer>> Start(DaemonOptions options);
  ~DaemonServer();

  int port() const { return port_; }
  int metrics_port() const { return metrics_ ? metrics_->port() : 0; }
  int http_port() const { return web_ ? web_->port() : 0; }
  // Stops scheduling, ends streams and drains in-flight RPCs until `deadline`.
  void Shutdown(absl::Time deadline);

 private:
  DaemonServer() = default;

  std::unique_ptr<DaemonMetrics> metrics_;  // before the state, which reports to it
  std::unique_ptr<Store> store_;
  std::unique_ptr<scheduler::PlacementPolicy> policy_;
  std::unique_ptr<LogStore> logs_;
  std::unique_ptr<ClusterState> state_;
  std::unique_ptr<ApiGuard> guard_;
  std::unique_ptr<ModelPlanner> planner_;
  JobServiceImpl::Streams job_streams_;
  std::unique_ptr<JobServiceImpl> job_service_;
  std::unique_ptr<ClusterServiceImpl> cluster_service_;
  std::shared_ptr<OrderStreams> order_streams_;  // shared with the streams gRPC still holds
  std::unique_ptr<AgentServiceImpl> agent_service_;
  std::unique_ptr<PlannerServiceImpl> planner_service_;
  std::unique_ptr<LeaderGate> gate_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<WebServer> web_;  // after server_: stopped before the channel it calls goes
  int port_ = 0;
  bool shut_down_ = false;
  // Last: destroyed first, so its thread stops before what its callbacks touch.
  std::unique_ptr<Leadership> leadership_;
  std::atomic<const Leadership*> leadership_view_{nullptr};  // what RPC threads read
};

}  // namespace hetpool::daemon
