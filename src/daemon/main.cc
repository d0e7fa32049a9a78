// hetpoold: the central daemon. Wiring lives in daemon_server.cc; this file parses flags and
// waits for SIGTERM/SIGINT.
#include <signal.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "spdlog/spdlog.h"
#include "src/common/escaped_log.h"
#include "src/common/flags.h"
#include "src/common/plan_convert.h"
#include "src/common/program.h"
#include "src/common/tls.h"
#include "src/common/watched_file.h"
#include "src/daemon/daemon_server.h"

namespace {

int Fail(const absl::Status& s) {
  std::cerr << "hetpoold: " << s.message() << "\n";
  return 2;
}

absl::Status ParsePortRange(const std::string& text, int* min, int* max) {
  std::vector<std::string> parts = absl::StrSplit(text, '-');
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], min) || !absl::SimpleAtoi(parts[1], max) || *min < 1 ||
      *max > 65535 || *min > *max) {
    return absl::InvalidArgumentError("--rdzv-port-range: expected MIN-MAX, e.g. 29500-30499");
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  // Everything hetpoold creates (store, WAL, audit log, job logs) is its own: a job running on
  // this host reads none of it, whatever umask the daemon was started with.
  umask(077);
  // Debian's Abseil is built with the mutex deadlock detector on: it records every pair of locks
  // taken, across every RPC thread, on each acquisition. With a thousand agents' order streams it
  // was a tenth of the daemon's CPU (tests/bench/fleet_scale; docs/benchmarks.md). Lock order is
  // checked where it belongs: in the tests, which keep the detector.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  hetpool::daemon::DaemonOptions options;
  std::string config, port_file, prices_file, profile_file, quotas_file, queues_file, log_level = "info";
  std::string preemption = "off";
  std::string archive = "keep";
  std::string port_range = "29500-30499";
  hetpool::FlagSet flags(
      "hetpoold: the hetpool control-plane daemon.\n"
      "Example: hetpoold --listen 0.0.0.0:7070 --data-dir /var/lib/hetpool --tls-ca pki/ca.pem \\\n"
      "           --tls-cert pki/hetpoold.pem --tls-key pki/hetpoold.key --tokens /etc/hetpool/tokens.json");
  flags.String("listen", &options.listen, "address:port to serve gRPC on (port 0 = any free port)");
  flags.String("data-dir", &options.data_dir, "directory for the SQLite store and job logs");
  flags.String("store", &options.store,
               "where jobs and nodes are kept: sqlite (default, in --data-dir) or etcd://host:port[,host:port...]"
               " (several hetpoold on one etcd elect a leader)");
  flags.Bool("recover", &options.recover,
             "SQLite: when hetpool.db is damaged or truncated, rebuild it from the rows that can be read (the damaged "
             "file is kept beside it) and start");
  flags.String("advertise", &options.advertise,
               "with etcd: this replica's address for clients (default: listen host and bound port)");
  flags.Duration("leader-lease", &options.leader_lease, "with etcd: how long a dead leader keeps the lead");
  flags.String("config", &config, "JSON file whose keys are these flag names");
  flags.Duration("lease-ttl", &options.cluster.lease_ttl, "agent lease; a node silent this long is NotReady");
  flags.Duration("orphan-grace", &options.cluster.orphan_grace,
                 "how long jobs of a node past its lease keep running (agents keep them through a control-plane "
                 "outage) before they restart elsewhere (docs/reliability.md)");
  flags.Int("quarantine-after", &options.cluster.hardware.quarantine_after,
            "quarantine a card once this many jobs failed on it with a hardware signature within "
            "--quarantine-window (0: never; docs/reliability.md)");
  flags.Duration("quarantine-window", &options.cluster.hardware.quarantine_window,
                 "the window --quarantine-after counts failures in");
  flags.Int("max-hardware-requeues", &options.cluster.hardware.max_hardware_requeues,
            "requeues of one job after hardware failures before it fails as \"hardware suspected\"");
  flags.Int("quarantine-node-after-cards", &options.cluster.hardware.quarantine_node_after_cards,
            "quarantine a whole node once this many of its cards are (0: never); jobs of --quarantine-after ids "
            "failing with a node-wide signature (its network) quarantine it too");
  flags.Duration("early-failure", &options.cluster.hardware.early_failure,
                 "a job's own failure this soon after it started counts against its card once the job runs past "
                 "this long on other cards (0: never; docs/reliability.md)");
  flags.Bool("return-cleared-cards", &options.cluster.hardware.return_cleared_cards,
             "a card quarantined for a fatal vendor signal returns by itself once its agent reports it healthy "
             "with the signal gone and its node passes its health check (default: the operator returns cards)");
  flags.Duration("heartbeat-interval", &options.cluster.heartbeat_interval,
                 "how often agents heartbeat when nothing changes (at most a third of --lease-ttl is used)");
  flags.Double("max-heartbeats-per-second", &options.cluster.max_heartbeats_per_second,
               "what the whole fleet's heartbeats may come to when nothing changes: past --heartbeat-interval x this "
               "many nodes, agents are told to beat less often, down to three beats a lease (0: no cap)");
  flags.String("rdzv-port-range", &port_range, "ports for torchrun rendezvous on rank-0 nodes, MIN-MAX");
  flags.Bool("metax-cuda-translation", &options.cluster.metax_cuda_translation,
             "MetaX nodes have a CUDA translation layer (cu-bridge): CUDA builds may run there");
  flags.String("prices", &prices_file,
               "planner price table (JSON): currency per card-hour per class, utilisation overrides (docs/planner.md)");
  flags.String("scheduler-profile", &profile_file,
               "scheduler plugins, weights and args (JSON; docs/scheduler.md); default: the built-in profile");
  hetpool::AddTlsFlags(flags, &options.tls, &options.insecure);
  flags.String(
      "tokens", &options.token_file,
      "hashed bearer tokens with users, groups and roles (JSON; hetpoolctl admin token); re-read when changed");
  flags.String("logs-dir", &options.logs_dir,
               "where job logs are kept (default DATA_DIR/logs); with several replicas on etcd, a directory every "
               "replica mounts, so logs survive a failover");
  flags.String("audit-log", &options.audit_log,
               "JSON-lines audit log of mutating and refused calls (default: DATA_DIR/audit.log)");
  int audit_max_mib = static_cast<int>(options.audit.max_bytes >> 20);
  flags.Int("audit-max-mib", &audit_max_mib, "rotate the audit log past this size (MiB); 5 old files are kept");
  int log_max_mib = static_cast<int>(options.logs.max_stream_bytes >> 20);
  flags.Int("log-max-mib", &log_max_mib,
            "job logs kept per node and generation (MiB); older output is rotated away (docs/reliability.md)");
  flags.Double("submit-rate", &options.submit_rate, "SubmitJob calls per second per user (0 = unlimited)");
  flags.Double("submit-burst", &options.submit_burst, "SubmitJob burst per user");
  flags.Int("max-calls-per-user", &options.call_limits.calls_per_user,
            "API calls one user may have in flight at once (default 512; 0: no cap)");
  flags.Int("max-streams-per-user", &options.call_limits.streams_per_user,
            "streams (watch, logs --follow) one user may hold open (default 256; 0: no cap)");
  flags.Int("max-streams-per-connection", &options.call_limits.streams_per_connection,
            "streams one client connection may hold open (default 128; 0: no cap)");
  flags.String("quotas", &quotas_file, "per-user and per-group card and queue quotas (JSON; docs/security.md)");
  flags.String(
      "queues", &queues_file,
      "fair-share queues: each group's weight and nominal cards (JSON, re-read when it changes; docs/sharing.md)");
  flags.String("preemption", &preemption,
               "whether a waiting job may stop others: off; priority (lower-priority jobs); fair-share (also jobs "
               "of groups above their share, for a group below its own; needs --queues) (docs/sharing.md)");
  flags.Values("preemption", {"off", "priority", "fair-share"});
  flags.Duration("defrag-after", &options.cluster.defrag.after,
                 "move movable jobs for a job that has waited this long on free but scattered cards (0 = never; "
                 "docs/sharing.md)");
  flags.Int("defrag-moves-per-hour", &options.cluster.defrag.moves_per_hour, "at most this many moves an hour");
  flags.Int("defrag-move-burst", &options.cluster.defrag.move_burst,
            "at most this many moves at once, the hour's others spread over it (0: all at once)");
  flags.Duration("defrag-window", &options.cluster.defrag.window, "a job is moved at most once within this long");
  flags.Duration("defrag-requeue-after", &options.cluster.defrag.requeue_after,
                 "for a job that has waited this long, jobs smaller than it may be moved even when they cannot "
                 "land elsewhere at once: they wait in the queue for their next place (0 = never; docs/sharing.md)");
  flags.Duration("elastic-grow-after", &options.cluster.elastic_grow_after,
                 "an elastic job's generation runs this long before it may grow into free cards (each resize "
                 "restarts it from its checkpoint; docs/sharing.md)");
  flags.Duration("retain-finished", &options.cluster.retain_finished,
                 "finished jobs leave the live tables this long after they end, into the store's archive (get and "
                 "usage still reach it) or dropped, per --archive (0 = keep them live forever; docs/operations.md)");
  flags.String("archive", &archive, "keep (default) or drop the jobs --retain-finished retires");
  flags.Values("archive", {"keep", "drop"});
  flags.String("metrics-listen", &options.metrics_listen,
               "host:port to serve Prometheus metrics on (/metrics; docs/operations.md); default: none");
  flags.String("http-listen", &options.http_listen,
               "host:port for the web dashboard (HTTPS with --tls-cert, HTTP with --insecure); default: none");
  flags.String("port-file", &port_file, "write the bound port here once serving (for scripts and tests)");
  flags.String("log-level", &log_level, "trace, debug, info, warn, error");
  if (auto exit_code = hetpool::ParseProgramFlags(flags, argc, argv, "hetpoold", &config)) return *exit_code;
  options.cluster.archive_finished = archive != "drop";
  if (options.cluster.retain_finished < absl::ZeroDuration()) {
    return Fail(absl::InvalidArgumentError("--retain-finished must not be negative"));
  }
  if (!(options.cluster.max_heartbeats_per_second >= 0)) {  // NaN too
    return Fail(absl::InvalidArgumentError("--max-heartbeats-per-second must be a number, not negative (0: no cap)"));
  }
  if (options.cluster.heartbeat_interval <= absl::ZeroDuration() || options.cluster.lease_ttl <= absl::ZeroDuration()) {
    return Fail(absl::InvalidArgumentError("--heartbeat-interval and --lease-ttl must be positive"));
  }
  if (audit_max_mib < 1 || log_max_mib < 1) {
    return Fail(absl::InvalidArgumentError("--audit-max-mib and --log-max-mib must be at least 1"));
  }
  options.audit.max_bytes = static_cast<uint64_t>(audit_max_mib) << 20;
  options.logs.max_stream_bytes = static_cast<uint64_t>(log_max_mib) << 20;
  if (auto s = ParsePortRange(port_range, &options.cluster.rendezvous_port_min, &options.cluster.rendezvous_port_max);
      !s.ok()) {
    return Fail(s);
  }
  if (!prices_file.empty()) {
    auto prices = hetpool::ReadPriceTableFile(prices_file);
    if (!prices.ok()) return Fail(absl::InvalidArgumentError(absl::StrCat("--prices ", prices.status().message())));
    options.cluster.prices = *prices;
    options.prices = *std::move(prices);
  }
  if (!quotas_file.empty()) {
    auto text = hetpool::ReadTextFile(quotas_file);
    if (!text.ok()) return Fail(text.status());
    auto quotas = hetpool::daemon::QuotaTable::Parse(*text);
    if (!quotas.ok())
      return Fail(absl::InvalidArgumentError(absl::StrCat("--quotas ", quotas_file, ": ", quotas.status().message())));
    options.cluster.quotas = std::make_shared<const hetpool::daemon::QuotaTable>(*std::move(quotas));
  }
  if (!queues_file.empty()) {
    auto file = hetpool::WatchedFile::Open(queues_file);
    if (!file.ok()) return Fail(file.status());
    auto queues = hetpool::daemon::QueueConfig::Parse(file->text());
    if (!queues.ok()) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("--queues ", queues_file, ": ", queues.status().message())));
    }
    options.cluster.queues = *std::move(queues);
    options.cluster.queues_file = *std::move(file);  // re-read from here when it changes
  }
  auto preemption_mode = hetpool::daemon::ParsePreemptionMode(preemption);
  if (!preemption_mode.ok()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--preemption: ", preemption_mode.status().message())));
  }
  if (*preemption_mode == hetpool::daemon::PreemptionMode::kFairShare && queues_file.empty()) {
    return Fail(
        absl::InvalidArgumentError("--preemption fair-share needs --queues (the groups' shares it reclaims by)"));
  }
  options.cluster.preemption = *preemption_mode;
  if (options.cluster.defrag.after < absl::ZeroDuration() || options.cluster.defrag.moves_per_hour < 1 ||
      options.cluster.defrag.move_burst < 0 || options.cluster.defrag.window < absl::ZeroDuration() ||
      options.cluster.defrag.requeue_after < absl::ZeroDuration()) {
    return Fail(
        absl::InvalidArgumentError("--defrag-after, --defrag-window and --defrag-requeue-after must not be "
                                   "negative, --defrag-moves-per-hour at least 1, --defrag-move-burst not negative"));
  }
  if (options.cluster.defrag.requeue_after > absl::ZeroDuration() &&
      options.cluster.defrag.requeue_after < options.cluster.defrag.after) {
    return Fail(absl::InvalidArgumentError("--defrag-requeue-after must be 0 (never) or at least --defrag-after"));
  }
  if (options.cluster.elastic_grow_after < absl::ZeroDuration()) {
    return Fail(absl::InvalidArgumentError("--elastic-grow-after must not be negative"));
  }
  if (!profile_file.empty()) {
    auto text = hetpool::ReadTextFile(profile_file);
    if (!text.ok()) return Fail(text.status());
    options.scheduler_profile = *std::move(text);
  }
  spdlog::set_level(spdlog::level::from_str(log_level));
  hetpool::UseEscapedLogs("%Y-%m-%dT%H:%M:%S.%e %^%l%$ hetpoold %v");

  // Before any thread starts, so only the sigwait below receives them.
  const sigset_t signals = hetpool::BlockShutdownSignals();

  auto server = hetpool::daemon::DaemonServer::Start(options);
  if (!server.ok()) return Fail(server.status());
  if (!port_file.empty()) {
    const std::string tmp = port_file + ".tmp";
    std::ofstream(tmp) << (*server)->port() << "\n";
    std::rename(tmp.c_str(), port_file.c_str());  // readers never see a half-written file
  }
  int received = 0;
  sigwait(&signals, &received);
  spdlog::info("signal {}: draining RPCs and stopping", received);
  (*server)->Shutdown(absl::Now() + absl::Seconds(10));
  server->reset();
  spdlog::info("stopped");
  return 0;
}
