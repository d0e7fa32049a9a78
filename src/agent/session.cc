#include "src/agent/session.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "drivers/backend_factory.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/security/credentials.h"
#include "spdlog/spdlog.h"
#include "src/agent/card_holders.h"
#include "src/agent/container_launch.h"
#include "src/agent/daemon_channel.h"
#include "src/agent/job_limits.h"
#include "src/common/convert.h"
#include "src/common/job_paths.h"
#include "src/common/leader_words.h"
#include "src/common/monotonic_clock.h"
#include "src/common/names.h"
#include "src/common/orders_parts.h"

namespace hetpool::agent {

namespace pb = ::hetpool::v1;

namespace {

constexpr absl::Duration kLoopPeriod = absl::Milliseconds(200);

// How often to heartbeat when nothing happens: what the daemon suggests (`hetpoold
// --heartbeat-interval`, stretched for a large fleet by --max-heartbeats-per-second; 0: none,
// then 1 s), but at least three beats per lease so that one lost heartbeat never makes the node
// NotReady.
absl::Duration HeartbeatPeriod(int64_t suggested_ms, absl::Duration lease_ttl) {
  absl::Duration period = suggested_ms > 0 ? absl::Milliseconds(suggested_ms) : absl::Seconds(1);
  if (lease_ttl > absl::ZeroDuration()) period = std::min(period, lease_ttl / 3);
  return std::max(period, kLoopPeriod);
}
constexpr size_t kLogPushBytes = 256 * 1024;

// Job ids become directory names.
bool SafePathComponent(const std::string& s) { return CheckPathComponent("job_id", s, 128).ok(); }

std::unique_ptr<grpc::ClientContext> ContextWithDeadline(absl::Duration timeout) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return ctx;
}

// The daemon holds the bytes before `pushed`: give their disk blocks back (the file keeps its size,
// so offsets stay as they were), and a job's output is not kept twice. Filesystems without holes
// keep the bytes; nothing else changes.
void ReleasePushedBytes(int fd, uint64_t pushed) {
  if (pushed == 0 || pushed == UINT64_MAX) return;
  fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(pushed));
}

}  // namespace

// The stub plus the order-stream reader thread for one registered session.
struct Session::Connection {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::AgentService::Stub> stub;
  grpc::ClientContext orders_ctx;
  std::thread orders_thread;
  absl::Mutex mu;
  std::optional<pb::Orders> pending ABSL_GUARDED_BY(mu);
  bool stream_ended ABSL_GUARDED_BY(mu) = false;
  grpc::Status stream_status ABSL_GUARDED_BY(mu);

  ~Connection() {
    orders_ctx.TryCancel();
    if (orders_thread.joinable()) orders_thread.join();
  }
};

Session::Session(SessionOptions options, std::vector<std::unique_ptr<drivers::DeviceBackend>> backends)
    : options_(std::move(options)),
      backends_(std::move(backends)),
      ledger_(options_.work_dir + "/process-groups", options_.work_dir),
      runner_(RunnerOptions{options_.kill_grace, &ledger_, options_.watchdog, options_.confinement,
                            [this] { return CardProcesses(); }, options_.container_runtime}) {
  for (const auto& b : backends_) {
    simulated_ = simulated_ || b->Simulated();
    lists_card_processes_ = lists_card_processes_ || !b->Simulated();
  }
  if (options_.confinement != nullptr && geteuid() == 0) {
    // A job dir that holds /tmp (/tmp itself, or /) means jobs work in the host's /tmp: hiding
    // it would hide their files.
    private_tmp_ = std::none_of(options_.sandbox.job_dirs.begin(), options_.sandbox.job_dirs.end(), [](const std::string& dir) {
      std::error_code ec;
      const std::string real = std::filesystem::weakly_canonical(dir, ec).string();
      return real == "/" || real == "/tmp";
    });
    if (!private_tmp_) spdlog::warn("jobs share the host's /tmp: it is one of --job-dirs");
  }
}

Session::~Session() = default;

absl::StatusOr<pb::NodeInventory> Session::Inventory() {
  auto inventory = drivers::CollectInventory(backends_, options_.collect);
  if (!inventory.ok()) return inventory.status();
  NodeInventory tracked = tracker_.Update(*std::move(inventory));
  AttributeCardProcesses(tracked.devices, runner_.RunningJobs());
  if (options_.container_runtime != nullptr) {
    // A runtime that does not answer is reported as none: no image job is sent here meanwhile.
    if (auto facts = options_.container_runtime->Facts(); facts.ok()) {
      tracked.container_runtime = facts->name;
      tracked.container_runtime_version = facts->version;
      tracked.images = facts->images;
    } else {
      spdlog::warn("container runtime: {}", std::string(facts.status().message()));
    }
  }
  pb::NodeInventory proto = ToProto(tracked);
  int running = 0;
  for (const auto& [key, record] : runner_.records()) running += record.exited ? 0 : 1;
  absl::MutexLock lock(&telemetry_mu_);
  telemetry_.inventory = proto;
  telemetry_.job_processes = running;
  telemetry_.registered = !session_id_.empty();
  return proto;
}

std::vector<std::pair<std::string, CardProcess>> Session::CardProcesses() {
  std::vector<std::pair<std::string, CardProcess>> out;
  if (!lists_card_processes_) return out;
  auto inventory = drivers::CollectInventory(backends_, options_.collect);
  if (!inventory.ok()) return out;
  for (const auto& d : tracker_.Update(*std::move(inventory)).devices) {
    for (const auto& p : d.processes) out.emplace_back(d.id, p);
  }
  return out;
}

std::string Session::DirtyCards(const std::vector<std::string>& device_ids) {
  std::vector<DeviceRecord> cards;
  for (const auto& id : device_ids) cards.push_back(DeviceRecord{.id = id});
  for (auto& [id, process] : CardProcesses()) {
    auto card = std::find_if(cards.begin(), cards.end(), [&](const DeviceRecord& d) { return d.id == id; });
    if (card != cards.end()) card->processes.push_back(process);
  }
  AttributeCardProcesses(cards, runner_.RunningJobs());
  std::vector<std::string> dirty;
  for (const auto& card : cards) {
    if (!card.dirty.empty()) dirty.push_back(absl::StrCat(card.id, ": ", card.dirty));
  }
  return absl::StrJoin(dirty, "; ");
}

NodeTelemetry Session::Telemetry() const {
  absl::MutexLock lock(&telemetry_mu_);
  return telemetry_;
}

std::shared_ptr<grpc::Channel> Session::ChannelToServer() {
  const size_t server = server_index_ % options_.servers.size();
  if (channel_ == nullptr || channel_server_ != server) {
    channel_ = MakeDaemonChannel(options_.servers[server], options_.credentials);
    channel_server_ = server;
  }
  return channel_;
}

void Session::WaitToRegister(absl::Duration backoff, const std::atomic<bool>* stop) {
  std::shared_ptr<grpc::Channel> channel = unreachable_ ? ChannelToServer() : nullptr;
  WaitForDaemon(channel.get(), backoff, kLoopPeriod, [&] {
    runner_.Poll();
    FenceIfCutOff();
    return !stop->load();
  });
}

bool Session::RegisterOnce(const pb::NodeInventory& inventory) {
  const std::string& server = options_.servers[server_index_ % options_.servers.size()];
  auto conn = std::make_unique<Connection>();
  conn->channel = ChannelToServer();
  conn->stub = pb::AgentService::NewStub(conn->channel);
  unreachable_ = false;

  pb::RegisterRequest req;
  req.set_node_name(options_.node_name);
  req.set_address(options_.address);
  *req.mutable_inventory() = inventory;
  req.set_torchrun_path(options_.torchrun_path);
  req.set_work_dir(options_.work_dir);
  for (const auto& [k, v] : options_.labels) (*req.mutable_labels())[k] = v;
  req.set_fault(Fault());
  *req.mutable_processes() = ProcessReports();
  pb::RegisterResponse resp;
  auto ctx = ContextWithDeadline(absl::Seconds(5));
  const grpc::Status status = conn->stub->Register(ctx.get(), req, &resp);
  if (!status.ok()) {
    spdlog::warn("register with {} failed: {}", server, status.error_message());
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
        status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      // Not reached (or too slow): say so, unless the connection stands (the daemon itself
      // answered UNAVAILABLE, a follower or one whose store refuses writes).
      unreachable_ = conn->channel->GetState(/*try_to_connect=*/false) != GRPC_CHANNEL_READY;
      ++server_index_;  // try the next daemon address
      // A follower names the leader: go there next, at once, rather than around the list with
      // a growing wait (that took 12-14 s of a 15 s lease).
      const std::string said = status.error_message();  // a copy: error_message() returns one
      absl::string_view message = said;
      if (absl::ConsumePrefix(&message, kLeaderIsAt)) {
        const auto named = std::find(options_.servers.begin(), options_.servers.end(), message);
        // At most once round the list without a wait: replicas with stale views could name
        // each other.
        if (named != options_.servers.end() && leader_hops_ < options_.servers.size()) {
          server_index_ = static_cast<size_t>(named - options_.servers.begin());
          leader_named_ = true;
          ++leader_hops_;
        }
      }
    }
    return false;
  }
  session_id_ = resp.session_id();
  reported_fault_ = req.fault();
  leader_hops_ = 0;
  fenced_ = false;
  // The daemon says how long it waits before giving a silent node's jobs away (older daemons do
  // not: then 80% of their lease). Never wait longer than that, whatever the flag says.
  const absl::Duration announced = resp.orphan_grace_ms() > 0 ? absl::Milliseconds(resp.orphan_grace_ms())
                                                              : absl::Milliseconds(resp.lease_ttl_ms()) * 0.8;
  if (!options_.fence_after.has_value()) {
    fence_after_ = announced;
  } else if (*options_.fence_after <= absl::ZeroDuration()) {
    fence_after_ = absl::ZeroDuration();  // never: the operator's explicit choice
  } else {
    fence_after_ = std::min(*options_.fence_after, announced);
  }
  lease_ttl_ = absl::Milliseconds(resp.lease_ttl_ms());
  heartbeat_every_ = HeartbeatPeriod(resp.heartbeat_interval_ms(), absl::Milliseconds(resp.lease_ttl_ms()));
  Contacted(MonotonicNow());
  reported_inventory_ = inventory;
  unreported_inventory_.reset();
  applied_version_ = 0;
  spdlog::info("registered with {} as {} (session {}, {} devices)", server, options_.node_name,
               session_id_, inventory.devices_size());

  pb::StreamOrdersRequest orders_req;
  orders_req.set_session_id(session_id_);
  orders_req.set_node_name(options_.node_name);
  Connection* c = conn.get();
  c->orders_thread = std::thread([c, orders_req] {
    auto reader = c->stub->StreamOrders(&c->orders_ctx, orders_req);
    pb::Orders part;
    OrdersAssembler parts;
    while (reader->Read(&part)) {
      std::optional<pb::Orders> orders = parts.Add(std::move(part));
      if (!orders) continue;  // the set is acted on only whole
      absl::MutexLock lock(&c->mu);
      c->pending = *std::move(orders);
    }
    grpc::Status finished = reader->Finish();
    absl::MutexLock lock(&c->mu);
    c->stream_ended = true;
    c->stream_status = finished;
  });
  conn_ = std::move(conn);
  return true;
}

LaunchSpec Session::ToLaunchSpec(const pb::LaunchOrder& order) const {
  const pb::NodeLaunchPlan& plan = order.plan();
  LaunchSpec spec;
  spec.job_id = order.job_id();
  spec.generation = order.generation();
  spec.argv.assign(plan.argv().begin(), plan.argv().end());
  spec.working_dir = plan.working_dir();
  spec.procs = plan.procs();
  spec.device_ids.assign(order.device_ids().begin(), order.device_ids().end());
  const std::string run_dir = JobRunDir(options_.work_dir, order.job_id(), order.generation());
  spec.run_dir = run_dir;
  spec.log_path = JobLogPath(options_.work_dir, order.job_id(), order.generation());
  spec.script = plan.script();
  spec.user = plan.user();
  if (options_.confinement != nullptr) {
    spec.limits = LimitsForLaunch(order, LimitsContext{&reported_inventory_, options_.confinement->Cpus(),
                                                       options_.confinement->Mems(), options_.job_pids_max});
  }
  if (private_tmp_) {
    spec.private_tmp = true;
    spec.keep_in_tmp = options_.sandbox.job_dirs;
    spec.keep_in_tmp.push_back(run_dir);
    // A job on an MPS-shared card meets its MPS server's shared memory in the host's /dev/shm.
    spec.private_shm = plan.env().count("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") == 0;
  }
  if (auto dir = ResolveWorkingDir(plan.working_dir(), options_.sandbox.job_dirs); dir.ok()) {
    spec.working_dir = *dir;
  } else {
    spec.refused = std::string(dir.status().message());
    spec.refused_failure = "WorkingDirNotFound";  // a directory the job may not use
  }
  if (auto run_as = ResolveRunAs(plan.user(), options_.sandbox, geteuid()); run_as.ok()) {
    spec.run_as = *std::move(run_as);
  } else if (spec.refused.empty()) {
    spec.refused = std::string(run_as.status().message());
  }
  // The job's environment is exactly this: a fixed base plus the plan; nothing is inherited.
  spec.env = {{"PATH", options_.job_path}, {"LANG", "C.UTF-8"}, {"PYTHONUNBUFFERED", "1"}};
  if (spec.run_as.switch_user) {
    spec.env["USER"] = spec.env["LOGNAME"] = spec.run_as.account;
    // Caches (torch, pip) need a writable home; an account without one gets the run directory.
    spec.env["HOME"] = spec.run_as.home.empty() ? run_dir : spec.run_as.home;
  }
  // In an image, the image's own PATH stands unless the job sets one.
  if (plan.has_container()) spec.env.erase("PATH");
  for (const auto& [k, v] : plan.env()) spec.env[k] = v;
  // Last, so no plan can change it: how a successor finds this job's processes (process_ledger.h).
  spec.env[kAgentMarkerVariable] = options_.work_dir;
  if (simulated_ && plan.torch_device() != "cpu") {
    // Simulated cards cannot run vendor kernels: run the real plan's ranks on CPU with gloo, and
    // keep what would have been used for inspection.
    spec.env["HETPOOL_SIMULATED"] = "1";
    spec.env["HETPOOL_PLANNED_DIST_BACKEND"] = plan.dist_backend();
    spec.env["HETPOOL_PLANNED_TORCH_DEVICE"] = plan.torch_device();
    spec.env["HETPOOL_DIST_BACKEND"] = "gloo";
    spec.env["HETPOOL_TORCH_DEVICE"] = "cpu";
    // A job across vendors: its groups' libraries are vendor kernels too.
    for (const char* var : {"HETPOOL_INTRA_BACKEND", "HETPOOL_INTER_BACKEND"}) {
      auto it = spec.env.find(var);
      if (it == spec.env.end()) continue;
      spec.env[absl::StrCat("HETPOOL_PLANNED_", absl::string_view(var).substr(8))] = it->second;
      it->second = "gloo";
    }
    spec.note = absl::StrCat("simulated devices: planned ", plan.dist_backend(), " on ",
                             plan.torch_device(), ", running gloo on CPU");
  }
  if (plan.has_container() && spec.refused.empty()) {
    AddContainer(order, ContainerContext{options_.container_runtime, options_.node_name, options_.sandbox.job_dirs,
                                         simulated_, &reported_inventory_},
                 spec);
  }
  return spec;
}

void Session::Reconcile(const pb::Orders& orders) {
  std::map<Runner::Key, const pb::LaunchOrder*> wanted;
  for (const auto& launch : orders.launches()) wanted[{launch.job_id(), launch.generation()}] = &launch;
  std::map<Runner::Key, const pb::KillOrder*> kills;
  for (const auto& kill : orders.kills()) kills[{kill.job_id(), kill.generation()}] = &kill;

  std::vector<Runner::Key> forget;
  for (auto& [key, record] : runner_.records()) {
    if (wanted.contains(key)) continue;
    if (!record.exited) {
      auto kill = kills.find(key);
      if (kill == kills.end()) {
        runner_.Kill(key, "no longer assigned to this node");
      } else {
        runner_.Kill(key, kill->second->reason(), absl::Milliseconds(kill->second->grace_ms()));
      }
    } else if (record.logs_flushed && !kills.contains(key)) {
      forget.push_back(key);  // the daemon has taken the exit into account
    }
  }
  for (const auto& key : forget) runner_.Forget(key);
  std::map<Runner::Key, HeldLaunch> held;
  for (const auto& [key, launch] : wanted) {
    if (runner_.records().contains(key)) continue;
    if (!SafePathComponent(launch->job_id())) {
      spdlog::error("refusing launch with unsafe job id '{}'", launch->job_id());
      continue;
    }
    LaunchSpec spec = ToLaunchSpec(*launch);
    if (const std::string why = WhyHeld(spec); !why.empty()) {
      // Said once per reason, not at every reconcile.
      if (!held_.contains(key) || held_[key].why != why) spdlog::warn("job {} g{}: waits: {}", key.first, key.second, why);
      held[key] = HeldLaunch{why, spec.device_ids};
      continue;
    }
    runner_.Start(spec);
  }
  held_ = std::move(held);
  if (!held_.empty()) {
    held_orders_ = orders;
  } else {
    held_orders_.reset();
  }
  applied_version_ = orders.version();
}

bool Session::PushChunk(const Runner::Key& key, ProcessRecord& r, absl::string_view data) {
  pb::PushLogsRequest req;
  req.set_session_id(session_id_);
  req.set_node_name(options_.node_name);
  req.set_job_id(key.first);
  req.set_generation(key.second);
  req.set_offset(r.log_pushed);
  req.set_data(data.data(), data.size());
  pb::PushLogsResponse resp;
  auto ctx = ContextWithDeadline(absl::Seconds(5));
  const grpc::Status status = conn_->stub->PushLogs(ctx.get(), req, &resp);
  if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
    r.log_pushed = UINT64_MAX;  // the daemon does not know the job (or this node in it): nothing to keep
    return true;
  }
  if (!status.ok()) return false;
  r.log_pushed = resp.next_offset();
  r.log_tail.append(data.data(), data.size());
  if (r.log_tail.size() > kLogTailBytes) r.log_tail.erase(0, r.log_tail.size() - kLogTailBytes);
  return true;
}

bool Session::PushLogs() {
  bool newly_flushed = false;
  for (auto& [key, r] : runner_.records()) {
    if (r.logs_flushed) continue;
    const bool was_exited = r.exited;  // read before the file, so no byte written after is missed
    // In the agent's own directory (job_paths.h), and never through a link all the same.
    const int fd = open(r.spec.log_path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    std::string buf(kLogPushBytes, '\0');
    bool failed = false;
    while (fd >= 0 && r.log_pushed != UINT64_MAX) {
      const ssize_t n = pread(fd, buf.data(), buf.size(), static_cast<off_t>(r.log_pushed));
      if (n <= 0) break;
      if (!PushChunk(key, r, absl::string_view(buf.data(), static_cast<size_t>(n)))) {
        failed = true;
        break;
      }
    }
    if (fd >= 0) {
      ReleasePushedBytes(fd, r.log_pushed);
      close(fd);
    }
    if (was_exited && !failed && r.log_pushed == 0) {
      // Nothing printed: push an empty chunk all the same, so the daemon knows the log exists
      // (and can tell a missing one from an empty one).
      failed = !PushChunk(key, r, "");
    }
    if (was_exited && !failed) {
      r.logs_flushed = true;
      newly_flushed = true;
      // torchrun exits 1 whichever way a worker failed: its report, now all pushed, says which
      // rank and how.
      if (r.spec.container && r.exit_code == kRuntimeFailedExit && !r.kill_sent && r.launch_failure.empty()) {
        // The runtime failed, not the job (a pull, a mount, a device): its own words say how.
        const std::string said = RuntimeError(r.log_tail);
        r.launch_failure = "ContainerFailed";
        r.message = absl::StrCat("container runtime failed (exit ", kRuntimeFailedExit, ") running image ",
                                 r.spec.container->image, said.empty() ? "" : ": ", said);
      } else if (r.exit_code != 0 && !r.kill_sent && r.launch_failure.empty()) {
        r.torchrun_failure = ParseTorchrunFailure(r.log_tail);
      }
      r.log_tail.clear();
    }
  }
  return newly_flushed;
}

google::protobuf::RepeatedPtrField<pb::ProcessStatus> Session::ProcessReports() {
  google::protobuf::RepeatedPtrField<pb::ProcessStatus> out;
  // Held back: reported, so the daemon neither counts the launch lost nor gives its cards away.
  for (const auto& [key, held] : held_) {
    auto* s = out.Add();
    s->set_job_id(key.first);
    s->set_generation(key.second);
    s->set_waiting(held.why);
    for (const auto& d : held.device_ids) s->add_device_ids(d);
  }
  for (const auto& [key, r] : runner_.records()) {
    auto* s = out.Add();
    s->set_job_id(key.first);
    s->set_generation(key.second);
    // An exit is reported only once its logs are with the daemon, so `wait` then `logs` is whole.
    const bool exited = r.exited && r.logs_flushed;
    s->set_running(!exited);
    s->set_exited(exited);
    s->set_exit_code(r.exit_code);
    s->set_message(r.message);
    s->set_pid(r.pid);
    s->set_note(r.spec.note);
    s->set_output_lost(OutputLost(r));
    s->set_confinement(r.confinement);
    s->set_strays_killed(r.strays_killed);
    for (const auto& leftover : r.card_leftovers) s->add_card_leftovers(leftover);
    for (const auto& arg : r.runtime_argv) s->add_runtime_argv(arg);
    for (const auto& d : r.spec.device_ids) s->add_device_ids(d);
    for (int rank : r.global_ranks) s->add_global_ranks(rank);
    if (!r.launch_failure.empty() || r.torchrun_failure || r.out_of_memory_mib > 0) {
      pb::RankFailure* failure = s->mutable_rank_failure();
      failure->set_out_of_memory_mib(r.out_of_memory_mib);
      failure->set_memory_asked(r.out_of_memory_mib > 0 && r.spec.limits.memory_asked);
      failure->set_node(options_.node_name);
      failure->set_launch_failure(r.launch_failure);
      failure->set_global_rank(-1);
      failure->set_local_rank(-1);
      if (const auto& t = r.torchrun_failure) {
        failure->set_global_rank(t->global_rank);
        failure->set_local_rank(t->local_rank);
        failure->set_exit_code(t->exit_code);
        failure->set_signal(t->signal);
        for (const auto& line : t->last_lines) failure->add_last_lines(line);
      }
    }
  }
  return out;
}

std::string Session::WhyHeld(const LaunchSpec& spec) {
  if (!spec.refused.empty()) return "";  // a refused launch "starts" at once, failing
  if (const std::string holder = runner_.UidHolder(spec.run_as.uid, spec.user);
      spec.run_as.switch_user && !holder.empty()) {
    return absl::StrCat("its account ", spec.run_as.account, " (uid ", spec.run_as.uid, ") still runs ", holder);
  }
  // Placed on a card a stranger holds (since the last inventory): wait for it to be clean.
  if (const std::string dirt = DirtyCards(spec.device_ids); !dirt.empty()) {
    return absl::StrCat("a card is held by a process of no job: ", dirt);
  }
  return "";
}

void Session::KeepWorkDirInBounds() {
  if (MonotonicNow() < next_work_dir_sweep_) return;
  next_work_dir_sweep_ = MonotonicNow() + absl::Minutes(1);
  std::set<RunDirJanitor::Key> running;
  for (const auto& [key, record] : runner_.records()) running.insert(key);
  const RunDirJanitor janitor(
      {.work_dir = options_.work_dir, .retention = options_.run_dir_retention, .job_disk_limit_mib = options_.job_disk_limit_mib});
  // File times are wall time, so the sweep's is too.
  const RunDirJanitor::Sweep sweep = janitor.Run(running, absl::Now());
  if (!sweep.removed.empty()) {
    spdlog::info("removed the run directories of {} generations that ended over {} ago", sweep.removed.size(),
                 absl::FormatDuration(options_.run_dir_retention));
  }
  for (const auto& [key, why] : sweep.over_limit) {
    spdlog::warn("job {} g{}: stopping it: {}", key.first, key.second, why);
    runner_.Kill(key, why);
  }
}

void Session::Serve(const std::atomic<bool>* stop, const std::atomic<bool>* drain) {
  absl::Time last_heartbeat = absl::InfinitePast();
  absl::Time last_inventory = MonotonicNow();
  while (!stop->load()) {
    // First, before anything is reported: an agent back from a pause or a partition longer than
    // the fencing deadline stops its (stale) job processes.
    FenceIfCutOff();
    if (fenced_) return;  // cut off: register again, wherever a daemon answers
    std::optional<pb::Orders> orders;
    bool stream_ended = false;
    grpc::Status stream_status;
    {
      absl::MutexLock lock(&conn_->mu);
      Connection* c = conn_.get();
      auto ready = [c]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu) { return c->pending.has_value() || c->stream_ended; };
      conn_->mu.AwaitWithTimeout(absl::Condition(&ready), kLoopPeriod);
      orders.swap(conn_->pending);
      stream_ended = conn_->stream_ended;
      stream_status = conn_->stream_status;
    }
    bool report_now = false;
    if (orders) {
      Reconcile(*orders);
      report_now = true;
    } else if (held_orders_) {
      const pb::Orders again = *held_orders_;  // Reconcile replaces held_orders_
      const size_t held_before = held_.size();
      Reconcile(again);
      report_now = held_.size() != held_before;  // one started: the daemon hears it now
    }
    report_now |= runner_.Poll();
    report_now |= PushLogs();
    KeepWorkDirInBounds();
    if (MonotonicNow() - last_inventory >= options_.inventory_refresh) {
      last_inventory = MonotonicNow();
      // The work dir may have room again: until the ledger is written, nothing new may start.
      if (!ledger_.last_write().ok()) ledger_.Rewrite().IgnoreError();
      auto inventory = Inventory();
      if (!inventory.ok()) {
        // Keep the last good inventory; say why the new one is not taken, once.
        const std::string error(inventory.status().message());
        if (error != last_inventory_error_) spdlog::error("device discovery failed: {}", error);
        last_inventory_error_ = error;
      } else if (!google::protobuf::util::MessageDifferencer::Equals(*inventory, reported_inventory_)) {
        // (Field by field: serialised bytes of messages with maps are not deterministic.)
        last_inventory_error_.clear();
        unreported_inventory_ = *std::move(inventory);
        report_now = true;  // a card going bad must reach the daemon within one refresh
      }
    }
    const std::string fault = Fault();
    report_now |= fault != reported_fault_;  // the daemon must stop placing here at once
    if (report_now || MonotonicNow() - last_heartbeat >= heartbeat_every_) {
      pb::HeartbeatRequest req;
      req.set_fault(fault);
      req.set_session_id(session_id_);
      req.set_node_name(options_.node_name);
      req.set_applied_orders_version(applied_version_);
      req.set_draining(drain != nullptr && drain->load());
      *req.mutable_processes() = ProcessReports();
      if (unreported_inventory_) *req.mutable_inventory() = *unreported_inventory_;
      pb::HeartbeatResponse resp;
      auto ctx = ContextWithDeadline(absl::Seconds(5));
      const grpc::Status status = conn_->stub->Heartbeat(ctx.get(), req, &resp);
      if (status.ok()) {
        last_heartbeat = MonotonicNow();
        Contacted(last_heartbeat);
        reported_fault_ = fault;
        // The fleet grew or shrank since this session began: the daemon spreads beats anew.
        if (resp.heartbeat_interval_ms() > 0) heartbeat_every_ = HeartbeatPeriod(resp.heartbeat_interval_ms(), lease_ttl_);
        if (unreported_inventory_) {
          reported_inventory_ = *unreported_inventory_;
          unreported_inventory_.reset();
        }
      } else if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
        spdlog::warn("session lost ({}); registering again", status.error_message());
        return;
      }
    }
    if (stream_ended) {
      spdlog::warn("order stream ended: {}", stream_status.error_message());
      return;  // register again (a restarted daemon has forgotten this session)
    }
    if (Drained(drain)) return;  // draining, and every job has ended and been accounted for
  }
}

std::string Session::Fault() const {
  if (ledger_.last_write().ok()) return "";
  return absl::StrCat("the agent cannot record job processes (", ledger_.last_write().message(),
                      "); it starts nothing until it can: free space under ", options_.work_dir);
}

void Session::Contacted(absl::Time when) {
  last_contact_ = when;
  if (options_.watchdog == nullptr) return;
  // The agent fences first (SIGTERM, then SIGKILL after --kill-grace); the watchdog is the
  // backstop, half a lease later, which is still before the daemon gives the jobs away (a lease
  // plus the grace after the last heartbeat it received).
  options_.watchdog->RenewUntil(fence_after_ > absl::ZeroDuration() ? fence_after_ + lease_ttl_ / 2
                                                                    : absl::InfiniteDuration());
}

void Session::FenceIfCutOff() {
  if (fenced_ || fence_after_ <= absl::ZeroDuration() || MonotonicNow() - last_contact_ < fence_after_) return;
  fenced_ = true;
  if (!runner_.AnyRunning()) return;
  const std::string reason =
      absl::StrCat("fenced: no hetpoold answered for ", absl::FormatDuration(MonotonicNow() - last_contact_));
  spdlog::error("{}; stopping every job process (their daemon has given them to other nodes)", reason);
  runner_.KillAll(reason);
}

void Session::Run(const std::atomic<bool>* stop, const std::atomic<bool>* drain) {
  // Whatever a killed predecessor left running is stopped before the daemon hears from us: it
  // will take this node as running nothing and restart those jobs as new generations.
  if (const int stopped = ledger_.StopLeftovers(options_.kill_grace); stopped > 0) {
    spdlog::warn("stopped {} job process group(s) left by a previous agent", stopped);
  }
  // And what escaped those groups: the predecessor's cgroups are emptied and removed.
  if (options_.confinement != nullptr) {
    if (const int killed = options_.confinement->StopLeftovers(); killed > 0) {
      spdlog::warn("killed {} process(es) left in a previous agent's job cgroups", killed);
    }
  }
  absl::Duration backoff = absl::Milliseconds(200);
  while (!stop->load() && !Drained(drain)) {
    FenceIfCutOff();  // before registering reports the processes
    auto inventory = Inventory();
    bool registered = false;
    if (!inventory.ok()) {
      spdlog::error("device discovery failed: {}", std::string(inventory.status().message()));
    } else {
      registered = RegisterOnce(*inventory);
    }
    if (registered) {
      backoff = absl::Milliseconds(200);
      Serve(stop, drain);
      conn_.reset();
      continue;
    }
    // While the daemon is away, keep reaping and logging locally; jobs keep running until the
    // fencing deadline.
    if (std::exchange(leader_named_, false)) {
      WaitToRegister(kLoopPeriod, stop);  // the named leader is asked next, without backing off
      continue;
    }
    leader_hops_ = 0;
    WaitToRegister(backoff, stop);
    backoff = std::min(backoff * 2, absl::Seconds(5));
  }
  // Graceful stop: take the job processes down with the agent.
  runner_.KillAll("agent stopping");
  const absl::Time give_up = MonotonicNow() + options_.kill_grace + absl::Seconds(2);
  while (runner_.AnyRunning() && MonotonicNow() < give_up) {
    runner_.Poll();
    absl::SleepFor(absl::Milliseconds(50));
  }
  if (conn_) PushLogs();
}

}  // namespace hetpool::agent
