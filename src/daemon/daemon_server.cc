#include "src/daemon/daemon_server.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "scheduler/framework/profile.h"
#include "spdlog/spdlog.h"
#include "src/daemon/security/audit_log.h"
#include "src/daemon/store/etcd_store.h"
#include "src/daemon/store/sqlite_recovery.h"
#include "src/daemon/store/sqlite_store.h"

namespace hetpool::daemon {
namespace {

constexpr int kMaxRequestBytes = 8 * 1024 * 1024;
// Threads kept waiting for the next call once theirs is answered (see the server's build below).
constexpr int kWaitingRpcThreads = 128;

// The highest job number with a log directory (logs/job-000123): jobs that ran leave one, so a
// store rebuilt after losing its newest rows still never hands their numbers out again.
uint64_t HighestLoggedJobSeq(const std::string& logs_dir) {
  uint64_t highest = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(logs_dir, ec)) {
    const std::string name = entry.path().filename().string();
    uint64_t seq = 0;
    if (absl::StartsWith(name, "job-") && absl::SimpleAtoi(name.substr(4), &seq)) highest = std::max(highest, seq);
  }
  return highest;
}

std::string LogsDir(const DaemonOptions& options) {
  return options.logs_dir.empty() ? options.data_dir + "/logs" : options.logs_dir;
}

std::string AuditLogPath(const DaemonOptions& options) {
  return options.audit_log.empty() ? options.data_dir + "/audit.log" : options.audit_log;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DaemonServer>> DaemonServer::Start(DaemonOptions options) {
  if (options.data_dir.empty()) return absl::InvalidArgumentError("--data-dir is required");
  std::error_code ec;
  std::filesystem::create_directories(options.data_dir, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("--data-dir ", options.data_dir, ": ", ec.message()));
  // The store holds every job's environment and the logs what jobs printed: the owner alone may
  // read them, whatever umask the daemon was started with.
  std::filesystem::permissions(options.data_dir, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::replace, ec);
  if (ec)
    return absl::InvalidArgumentError(absl::StrCat("--data-dir ", options.data_dir, ": chmod 0700: ", ec.message()));

  std::unique_ptr<DaemonServer> d(new DaemonServer());
  EtcdStore* etcd = nullptr;
  SqliteStore* sqlite = nullptr;
  std::string etcd_endpoints;
  if (options.store.empty() || options.store == "sqlite") {
    const std::string path = options.data_dir + "/hetpool.db";
    const absl::Time opening = absl::Now();
    // --recover compares every index with its table: damage there passes the pages' check.
    auto store = SqliteStore::Open(path, SqliteStore::OpenOptions{.check_indexes = options.recover});
    // With "loaded ... in" below, the time a restart takes before it answers (the fleet bench reads both).
    if (store.ok())
      spdlog::info("opened and checked {} in {:.3f} s", path, absl::ToDoubleSeconds(absl::Now() - opening));
    if (store.ok() && options.recover) {
      // An ordinary start checks the archive after it serves; --recover checks it first, so that
      // a damaged archive is rebuilt too.
      if (absl::Status archive = (*store)->CheckArchive(/*check_indexes=*/true); absl::IsFailedPrecondition(archive)) {
        store.value().reset();
        store = archive;
      } else if (absl::Status rows = CheckRowsParse(**store, path); absl::IsDataLoss(rows)) {
        // Damage inside a row, on a page SQLite finds whole: the start would stop at it.
        spdlog::warn("--recover: {}", std::string(rows.message()));
        store.value().reset();
        store = absl::FailedPreconditionError(rows.message());
      }
    }
    if (!store.ok() && absl::IsFailedPrecondition(store.status()) && options.recover) {
      // Ids continue above every one there is evidence of: the job log directories, and the
      // audit log's acknowledged submissions (a store truncated to nothing holds none).
      const uint64_t floor =
          std::max(HighestLoggedJobSeq(LogsDir(options)), HighestSubmittedJobSeq(AuditLogPath(options)));
      auto recovered = RecoverSqliteStore(path, floor);
      if (!recovered.ok()) return recovered.status();
      spdlog::warn(
          "--recover: rebuilt {} from {} jobs, {} archived jobs and {} nodes ({} of them read page by page; "
          "{} rows unreadable, set aside); the damaged file is {}; job ids continue above {}",
          path, recovered->jobs, recovered->archived, recovered->nodes, recovered->salvaged, recovered->unreadable,
          recovered->damaged_copy, recovered->highest_job_seq);
      if (recovered->wal.damaged > 0) {
        spdlog::warn(
            "--recover: its WAL had {} damaged frames of {}; {} intact frames past the first damaged one "
            "were read too",
            recovered->wal.damaged, recovered->wal.frames, recovered->wal.past_first_damage);
      }
      if (!recovered->wal_problem.empty()) {
        spdlog::warn("--recover: its WAL could not be read frame by frame: {}", recovered->wal_problem);
      }
      store = SqliteStore::Open(path);
    } else if (store.ok() && options.recover) {
      spdlog::info("--recover: {} passed its check; nothing to recover", path);
    }
    if (!store.ok()) return store.status();
    sqlite = store->get();
    d->store_ = *std::move(store);
  } else if (absl::StartsWith(options.store, "etcd://")) {
    etcd_endpoints = options.store.substr(std::strlen("etcd://"));
    auto store = EtcdStore::Open(etcd_endpoints);
    if (!store.ok()) return store.status();
    etcd = store->get();
    d->store_ = *std::move(store);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--store ", options.store, ": expected sqlite or etcd://host:port[,host:port...]"));
  }
  auto framework =
      scheduler::FrameworkFromProfile(options.scheduler_profile.empty() ? scheduler::DefaultProfileJson()
                                                                        : absl::string_view(options.scheduler_profile));
  if (!framework.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--scheduler-profile: ", framework.status().message()));
  }
  d->policy_ = *std::move(framework);

  // Security first: a daemon that cannot check callers must not serve.
  if (options.insecure && !options.token_file.empty()) {
    return absl::InvalidArgumentError("--tokens needs TLS: tokens sent in plaintext are anyone's (drop --insecure)");
  }
  if (!options.insecure && options.token_file.empty()) {
    return absl::InvalidArgumentError(
        "--tokens is required with TLS (hetpoolctl admin token makes one), or --insecure");
  }
  if (auto s = CheckTransportFlags(options.tls, options.insecure, /*cert_required=*/true); !s.ok()) return s;
  auto server_credentials = MakeServerCredentials(options.tls, options.insecure);
  if (!server_credentials.ok()) return server_credentials.status();
  auto leader_credentials = MakeChannelCredentials(options.tls, options.insecure);
  if (!leader_credentials.ok()) return leader_credentials.status();
  std::unique_ptr<Authenticator> authenticator;
  if (options.insecure) {
    spdlog::warn("--insecure: plaintext, and every caller may do anything (cancel any job, pose as any node)");
    authenticator = Authenticator::Unchecked();
  } else {
    auto opened = Authenticator::Open(options.token_file);
    if (!opened.ok()) return absl::InvalidArgumentError(absl::StrCat("--tokens ", opened.status().message()));
    authenticator = *std::move(opened);
  }
  auto audit = AuditLog::Open(AuditLogPath(options), options.audit);
  if (!audit.ok()) return audit.status();
  if (!options.metrics_listen.empty()) {
    auto metrics = DaemonMetrics::Start(options.metrics_listen);
    if (!metrics.ok()) return metrics.status();
    d->metrics_ = *std::move(metrics);
    options.cluster.observer = d->metrics_.get();
    spdlog::info("metrics on port {} (/metrics)", d->metrics_->port());
  }
  d->guard_ = std::make_unique<ApiGuard>(std::move(authenticator), *std::move(audit),
                                         std::make_unique<RateLimiter>(options.submit_rate, options.submit_burst),
                                         d->store_.get(), d->metrics_.get(),
                                         std::make_unique<CallLimiter>(options.call_limits));
  auto logs = LogStore::Open(LogsDir(options), options.logs);
  if (!logs.ok()) return logs.status();
  d->logs_ = *std::move(logs);
  d->state_ = std::make_unique<ClusterState>(options.cluster, d->store_.get(), d->policy_.get());
  if (d->metrics_) d->metrics_->Watch(d->state_.get());
  // On etcd, several replicas may share the state: only the elected leader loads and acts.
  const bool replicated = etcd != nullptr;
  DaemonServer* self = d.get();
  d->gate_ = std::make_unique<LeaderGate>(
      !replicated,
      [self] {
        const Leadership* l = self->leadership_view_.load();  // RPC threads: read through the atomic
        return l != nullptr ? l->Leader() : std::string();
      },
      *leader_credentials,
      [self] {
        const Leadership* l = self->leadership_view_.load();
        return l != nullptr ? l->NoLeaderReason() : std::string("no leader is elected yet");
      });
  if (!replicated) {
    if (auto s = d->state_->Load(); !s.ok()) {
      if (sqlite != nullptr && absl::IsDataLoss(s)) {
        return absl::DataLossError(absl::StrCat(
            s.message(), " (in ", options.data_dir,
            "/hetpool.db). hetpoold will not start on it: restore it from a "
            "backup, or start hetpoold with --recover to set the rows that do not parse aside (they stay in the "
            "damaged copy) and start on the rest; docs/reliability.md"));
      }
      return s;
    }
  }
  d->planner_ = std::make_unique<ModelPlanner>(options.prices);
  const ApiGuard* guard = d->guard_.get();
  d->job_streams_ = {JobStreams<pb::WatchJobResponse>::Start(d->state_.get(), guard),
                     JobStreams<pb::LogChunk>::Start(d->state_.get(), guard)};
  d->job_service_ = std::make_unique<JobServiceImpl>(d->state_.get(), d->logs_.get(), d->planner_.get(), d->gate_.get(),
                                                     guard, d->job_streams_);
  d->cluster_service_ = std::make_unique<ClusterServiceImpl>(d->state_.get(), d->gate_.get(), guard);
  d->order_streams_ = OrderStreams::Start(d->state_.get());
  d->agent_service_ = std::make_unique<AgentServiceImpl>(d->state_.get(), d->order_streams_.get(), d->logs_.get(),
                                                         d->gate_.get(), guard);
  d->planner_service_ = std::make_unique<PlannerServiceImpl>(d->state_.get(), d->planner_.get(), d->gate_.get(), guard);

  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, *server_credentials, &d->port_);
  // No SO_REUSEPORT (gRPC's default turns it on): a second process on this address fails to
  // start instead of sharing its calls, and an HA replica that bound its address knows that no
  // other live replica serves there (Leadership takes over its own predecessor's key).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Requests are small (a job spec, a heartbeat with an inventory, a 4 MiB log push at most):
  // anything larger is refused before it is parsed.
  builder.SetMaxReceiveMessageSize(kMaxRequestBytes);
  // gRPC's sync server keeps at most two threads waiting for calls by default: each call beyond
  // starts a thread that ends when its call does. With 5,000 nodes heartbeating and 50 clients
  // submitting, starting and ending those threads was a fifth of the daemon's RPC CPU (perf,
  // 500 submissions/s). Threads that finished a call now stay, up to kWaitingRpcThreads, for the
  // next one; a waiting thread costs a blocked poll and its stack.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 2);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, kWaitingRpcThreads);
  builder.RegisterService(d->job_service_.get());
  builder.RegisterService(d->cluster_service_.get());
  builder.RegisterService(d->agent_service_.get());
  builder.RegisterService(d->planner_service_.get());
  d->server_ = builder.BuildAndStart();
  if (!d->server_ || d->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen));
  }
  if (!options.http_listen.empty()) {
    // The dashboard calls this daemon's own services in-process, with the browser's token.
    auto web = WebServer::Start({options.http_listen, options.tls, options.insecure},
                                d->server_->InProcessChannel(grpc::ChannelArguments()));
    if (!web.ok()) return web.status();
    d->web_ = *std::move(web);
  }
  if (!replicated) {
    d->state_->Start();
    // After the first answer can go out: the archive is most of a large store's file.
    if (sqlite != nullptr && !options.recover) sqlite->CheckArchiveInBackground();
  } else {
    Leadership::Options lo;
    lo.endpoints = etcd_endpoints;
    lo.self = options.advertise.empty()
                  ? absl::StrCat(options.listen.substr(0, options.listen.rfind(':')), ":", d->port_)
                  : options.advertise;
    lo.ttl = options.leader_lease;
    lo.on_elected = [self, etcd, key = lo.key](int64_t fencing_revision) {
      // Writes from here on carry the fencing token; then the state is read and served.
      etcd->SetGuard(key, fencing_revision);
      if (absl::Status s = self->state_->Load(); !s.ok()) {
        spdlog::critical("elected, but the state cannot be loaded: {}", std::string(s.message()));
        std::_Exit(3);
      }
      self->state_->Start();
      self->gate_->Open();
      spdlog::info("leading: serving and scheduling");
    };
    lo.on_lost = [] {
      // A deposed leader must stop acting at once; its supervisor restarts it as a follower.
      spdlog::critical("leadership lost: exiting so that this replica stops acting");
      std::_Exit(3);
    };
    auto leadership = Leadership::Start(std::move(lo));
    if (!leadership.ok()) return leadership.status();
    d->leadership_ = *std::move(leadership);
    d->leadership_view_ = d->leadership_.get();
  }
  spdlog::info("hetpoold listening on port {} (data dir {}{})", d->port_, options.data_dir,
               replicated ? ", etcd store: leader election on" : "");
  return d;
}

void DaemonServer::Shutdown(absl::Time deadline) {
  if (shut_down_) return;
  shut_down_ = true;
  if (leadership_) leadership_->Resign();  // revokes the lease: another replica takes over at once
  web_.reset();                            // no new page requests
  if (metrics_) metrics_->Watch(nullptr);  // scrapes stop reading the state before it goes
  // Stop the state first: it wakes every job watch so they return promptly; then end the agents'
  // order streams, which gRPC's shutdown waits for.
  state_->Stop();
  order_streams_->Stop();
  job_streams_.watches->Stop();
  job_streams_.logs->Stop();
  server_->Shutdown(absl::ToChronoTime(deadline));
  server_->Wait();
}

DaemonServer::~DaemonServer() {
  if (server_) Shutdown(absl::Now() + absl::Seconds(5));
}

}  // namespace hetpool::daemon
