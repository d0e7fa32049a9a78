#include "src/agent/session.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "drivers/backend_factory.h"
#include "google/protobuf/util/message_differencer.h"
#include "spdlog/spdlog.h"
#include "src/agent/child_exit_watch.h"
#include "src/agent/process_reports.h"
#include "src/agent/rendezvous_port.h"
#include "src/common/convert.h"
#include "src/common/names.h"

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

// Job ids become directory names.
bool SafePathComponent(const std::string& s) { return CheckPathComponent("job_id", s, 128).ok(); }

// A job dir that holds /tmp (/tmp itself, or /) means jobs work in the host's /tmp: hiding it
// would hide their files.
bool JobDirsAllowPrivateTmp(const std::vector<std::string>& job_dirs) {
  return std::none_of(job_dirs.begin(), job_dirs.end(), [](const std::string& dir) {
    std::error_code ec;
    const std::string real = std::filesystem::weakly_canonical(dir, ec).string();
    return real == "/" || real == "/tmp";
  });
}

}  // namespace

Session::Session(SessionOptions options, std::vector<std::unique_ptr<drivers::DeviceBackend>> backends)
    : options_(std::move(options)),
      clock_(options_.clock),
      backends_(std::move(backends)),
      card_processes_(&backends_, &tracker_),
      ledger_(options_.work_dir + "/process-groups", options_.work_dir),
      runner_(RunnerOptions{.kill_grace = options_.kill_grace,
                            .ledger = &ledger_,
                            .watchdog = options_.watchdog,
                            .confinement = options_.confinement,
                            .card_processes = [this] { return card_processes_.Now(); },
                            .container_runtime = options_.container_runtime,
                            .clock = clock_,
                            .spawner = options_.spawner}),
      gate_(LaunchGateProbes{
          .uid_holder = [this](uid_t uid, const std::string& user) { return runner_.UidHolder(uid, user); },
          .dirty_cards =
              [this](const std::vector<std::string>& ids) {
                return card_processes_.DirtyCards(ids, runner_.RunningJobs());
              }}),
      shipper_([this](const Runner::Key& key, uint64_t offset, absl::string_view data) {
        return SendLogChunk(key, offset, data);
      }),
      own_dialer_(options_.dialer == nullptr ? MakeGrpcDaemonDialer(options_.credentials) : nullptr),
      registration_(options_.servers, options_.dialer != nullptr ? options_.dialer : own_dialer_.get(), kLoopPeriod),
      fence_(options_.fence_after, options_.watchdog, clock_),
      health_check_(options_.health_check, clock_),
      last_inventory_(clock_()),
      last_heartbeat_(absl::InfinitePast()) {
  for (const auto& b : backends_) {
    simulated_ = simulated_ || b->Simulated();
    const std::string watching = b->WatchHealth([changed = health_changed_] { changed->store(true); });
    if (!watching.empty()) spdlog::info("{} health watch: {}", std::string(b->Name()), watching);
  }
  // The launch adapter's start-up file (launch_adapter.h), rewritten by each agent: without it
  // jobs still run, unadapted.
  if (const absl::Status installed = InstallLaunchAdapter(options_.work_dir + "/adapter"); installed.ok()) {
    adapter_dir_ = options_.work_dir + "/adapter";
  } else {
    spdlog::warn("{}: jobs run unadapted", std::string(installed.message()));
  }
  if (options_.confinement != nullptr && geteuid() == 0) {
    private_tmp_ = JobDirsAllowPrivateTmp(options_.sandbox.job_dirs);
    if (!private_tmp_) spdlog::warn("jobs share the host's /tmp: it is one of --job-dirs");
  }
}

Session::~Session() = default;

absl::StatusOr<pb::NodeInventory> Session::Inventory() {
  auto inventory = drivers::CollectInventory(backends_, options_.collect);
  if (!inventory.ok()) return inventory.status();
  NodeInventory tracked = tracker_.Update(*std::move(inventory));
  AttributeCardProcesses(tracked.devices, runner_.RunningJobs());
  health_check_.BlameNamedCards(tracked.devices);
  device_ids_.clear();
  for (const DeviceRecord& d : tracked.devices) device_ids_.push_back(d.id);
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

NodeTelemetry Session::Telemetry() const {
  absl::MutexLock lock(&telemetry_mu_);
  return telemetry_;
}

google::protobuf::RepeatedPtrField<pb::ProcessStatus> Session::ProcessReports() const {
  google::protobuf::RepeatedPtrField<pb::ProcessStatus> out;
  // Held back: reported, so the daemon neither counts the launch lost nor gives its cards away.
  gate_.Report(out);
  ReportProcesses(runner_.records(), options_.node_name, out);
  return out;
}

bool Session::RegisterOnce(const pb::NodeInventory& inventory) {
  pb::RegisterRequest req;
  req.set_node_name(options_.node_name);
  req.set_address(options_.address);
  *req.mutable_inventory() = inventory;
  req.set_torchrun_path(options_.torchrun_path);
  req.set_python_path(options_.python_path);
  req.set_work_dir(options_.work_dir);
  for (const auto& [k, v] : options_.labels) (*req.mutable_labels())[k] = v;
  req.set_fault(Fault());
  *req.mutable_processes() = ProcessReports();
  pb::RegisterResponse resp;
  std::unique_ptr<DaemonLink> link = registration_.Register(req, &resp);
  if (link == nullptr) return false;
  session_id_ = resp.session_id();
  reported_fault_ = req.fault();
  fence_.Registered(resp);
  heartbeat_every_ = HeartbeatPeriod(resp.heartbeat_interval_ms(), absl::Milliseconds(resp.lease_ttl_ms()));
  reported_inventory_ = inventory;
  unreported_inventory_.reset();
  applied_version_ = 0;
  spdlog::info("registered with {} as {} (session {}, {} devices)", registration_.last_server(), options_.node_name,
               session_id_, inventory.devices_size());
  pb::StreamOrdersRequest orders_req;
  orders_req.set_session_id(session_id_);
  orders_req.set_node_name(options_.node_name);
  link->FollowOrders(orders_req);
  link_ = std::move(link);
  return true;
}

LaunchNodeFacts Session::NodeFacts() const {
  LaunchNodeFacts node{.node_name = options_.node_name,
                       .work_dir = options_.work_dir,
                       .job_path = options_.job_path,
                       .sandbox = options_.sandbox,
                       .agent_uid = geteuid(),
                       .simulated = simulated_,
                       .adapter = {.dir = adapter_dir_, .node_allows = options_.adapt, .simulated = simulated_},
                       .private_tmp = private_tmp_,
                       .job_pids_max = options_.job_pids_max,
                       .container_runtime = options_.container_runtime,
                       .inventory = &reported_inventory_};
  if (options_.confinement != nullptr) {
    node.confined = true;
    node.agent_cpus = options_.confinement->Cpus();
    node.agent_mems = options_.confinement->Mems();
  }
  return node;
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
  // The node's facts read once a pass, and only when some launch is built (they read the
  // agent's cpuset from its cgroup): held launches are reconciled again every loop.
  std::optional<LaunchNodeFacts> node;
  gate_.Begin();
  for (const auto& [key, launch] : wanted) {
    if (runner_.records().contains(key)) continue;
    if (!SafePathComponent(launch->job_id())) {
      spdlog::error("refusing launch with unsafe job id '{}'", launch->job_id());
      continue;
    }
    if (!node) node = NodeFacts();
    LaunchSpec spec = BuildLaunchSpec(*launch, *node);
    ApplyPreflight(spec);
    if (spec.refused.empty() && spec.hosted_rendezvous_port > 0) {
      if (std::string why = WhyRendezvousPortUnusable(spec.hosted_rendezvous_port); !why.empty()) {
        spec.refused = std::move(why);
        spec.refused_failure = kRendezvousPortTaken;  // the node's: the daemon tries another port
      }
    }
    if (gate_.Admit(key, spec)) runner_.Start(spec);
  }
  gate_.End(orders);
  applied_version_ = orders.version();
}

void Session::ApplyPreflight(LaunchSpec& spec) {
  if (!spec.refused.empty()) return;
  const PreflightVerdict verdict = health_check_.Preflight(spec.job_id, spec.device_ids, device_ids_);
  switch (verdict.state) {
    case PreflightVerdict::State::kNotAsked: return;
    case PreflightVerdict::State::kRunning: spec.held_for = verdict.words; return;
    case PreflightVerdict::State::kPassed:
      if (!verdict.words.empty()) spec.AddNote(verdict.words);
      return;
    case PreflightVerdict::State::kFailed:
      // The node's fault, not the job's: the daemon requeues it elsewhere at once.
      spec.refused = verdict.words;
      spec.refused_failure = "PreflightFailed";
      return;
  }
}

ChunkAnswer Session::SendLogChunk(const Runner::Key& key, uint64_t offset, absl::string_view data) {
  pb::PushLogsRequest req;
  req.set_session_id(session_id_);
  req.set_node_name(options_.node_name);
  req.set_job_id(key.first);
  req.set_generation(key.second);
  req.set_offset(offset);
  req.set_data(data.data(), data.size());
  pb::PushLogsResponse resp;
  const grpc::Status status = link_->PushLogs(req, &resp);
  if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) return {ChunkAnswer::kUnknownJob};
  if (!status.ok()) return {ChunkAnswer::kRetry};
  return {ChunkAnswer::kTaken, resp.next_offset()};
}

void Session::KeepWorkDirInBounds() {
  if (clock_() < next_work_dir_sweep_) return;
  next_work_dir_sweep_ = clock_() + absl::Minutes(1);
  std::set<RunDirJanitor::Key> running;
  for (const auto& [key, record] : runner_.records()) running.insert(key);
  const RunDirJanitor janitor({.work_dir = options_.work_dir,
                               .retention = options_.run_dir_retention,
                               .job_disk_limit_mib = options_.job_disk_limit_mib});
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

bool Session::ApplyOrders(std::optional<pb::Orders> orders) {
  if (orders) {
    Reconcile(*orders);
    return true;
  }
  if (!gate_.held_orders()) return false;
  const pb::Orders again = *gate_.held_orders();  // Reconcile replaces the gate's copy
  const size_t held_before = gate_.held();
  Reconcile(again);
  return gate_.held() != held_before;  // one started: the daemon hears it now
}

bool Session::RefreshInventoryIfDue() {
  // A health event (an Xid) is reported at once, not at the next refresh.
  // So is a health check's new verdict (the cards it names).
  const bool health_event = health_changed_->exchange(false) | health_check_.TakeVerdictChanged();
  if (!health_event && clock_() - last_inventory_ < options_.inventory_refresh) return false;
  last_inventory_ = clock_();
  // The work dir may have room again: until the ledger is written, nothing new may start.
  if (!ledger_.last_write().ok()) ledger_.Rewrite().IgnoreError();
  auto inventory = Inventory();
  if (!inventory.ok()) {
    // Keep the last good inventory; say why the new one is not taken, once.
    const std::string error(inventory.status().message());
    if (error != last_inventory_error_) spdlog::error("device discovery failed: {}", error);
    last_inventory_error_ = error;
    return false;
  }
  // (Field by field: serialised bytes of messages with maps are not deterministic.)
  if (google::protobuf::util::MessageDifferencer::Equals(*inventory, reported_inventory_)) return false;
  last_inventory_error_.clear();
  unreported_inventory_ = *std::move(inventory);
  return true;  // a card going bad must reach the daemon within one refresh
}

bool Session::Heartbeat(bool draining) {
  pb::HeartbeatRequest req;
  const std::string fault = Fault();
  req.set_fault(fault);
  req.set_session_id(session_id_);
  req.set_node_name(options_.node_name);
  req.set_applied_orders_version(applied_version_);
  req.set_draining(draining);
  *req.mutable_processes() = ProcessReports();
  if (unreported_inventory_) *req.mutable_inventory() = *unreported_inventory_;
  pb::HeartbeatResponse resp;
  const grpc::Status status = link_->Heartbeat(req, &resp);
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
    spdlog::warn("session lost ({}); registering again", status.error_message());
    return false;
  }
  if (!status.ok()) return true;  // tried again at the next beat; the fence counts the silence
  last_heartbeat_ = clock_();
  fence_.Contacted();
  reported_fault_ = fault;
  // The fleet grew or shrank since this session began: the daemon spreads beats anew.
  if (resp.heartbeat_interval_ms() > 0)
    heartbeat_every_ = HeartbeatPeriod(resp.heartbeat_interval_ms(), fence_.lease_ttl());
  if (unreported_inventory_) {
    reported_inventory_ = *unreported_inventory_;
    unreported_inventory_.reset();
  }
  return true;
}

void Session::Serve(const std::atomic<bool>* stop, const std::atomic<bool>* drain) {
  last_heartbeat_ = absl::InfinitePast();
  last_inventory_ = clock_();
  // A job's exit is reaped, pushed and reported at once (the link outlives this watch).
  const ChildExitWatch child_exits([link = link_.get()] { link->Wake(); });
  while (!stop->load()) {
    // First, before anything is reported: an agent back from a pause or a partition longer than
    // the fencing deadline stops its (stale) job processes.
    FenceIfCutOff();
    if (fence_.fenced()) return;  // cut off: register again, wherever a daemon answers
    health_check_.MaybeRun();
    OrdersUpdate update = link_->AwaitOrders(kLoopPeriod);
    bool report_now = ApplyOrders(std::move(update.orders));
    report_now |= runner_.Poll();
    report_now |= shipper_.Ship(runner_.records());
    report_now |= runner_.StopLingering(options_.failed_rank_grace);
    KeepWorkDirInBounds();
    report_now |= RefreshInventoryIfDue();
    report_now |= Fault() != reported_fault_;  // the daemon must stop placing here at once
    if (report_now || clock_() - last_heartbeat_ >= heartbeat_every_) {
      if (!Heartbeat(drain != nullptr && drain->load())) return;
    }
    if (update.ended) {
      spdlog::warn("order stream ended: {}", update.end_message);
      return;  // register again (a restarted daemon has forgotten this session)
    }
    if (Drained(drain)) return;  // draining, and every job has ended and been accounted for
  }
}

std::string Session::Fault() const {
  if (!ledger_.last_write().ok()) {
    return absl::StrCat("the agent cannot record job processes (", ledger_.last_write().message(),
                        "); it starts nothing until it can: free space under ", options_.work_dir);
  }
  return health_check_.NodeFailure(device_ids_);
}

void Session::FenceIfCutOff() {
  if (!fence_.CutOffNow() || !runner_.AnyRunning()) return;
  const std::string reason =
      absl::StrCat("fenced: no hetpoold answered for ", absl::FormatDuration(fence_.since_contact()));
  spdlog::error("{}; stopping every job process (their daemon has given them to other nodes)", reason);
  runner_.KillAll(reason);
}

void Session::StopLeftovers() {
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
}

void Session::Run(const std::atomic<bool>* stop, const std::atomic<bool>* drain) {
  StopLeftovers();
  while (!stop->load() && !Drained(drain)) {
    health_check_.MaybeRun();
    FenceIfCutOff();  // before registering reports the processes
    auto inventory = Inventory();
    if (!inventory.ok()) {
      spdlog::error("device discovery failed: {}", std::string(inventory.status().message()));
    } else if (RegisterOnce(*inventory)) {
      Serve(stop, drain);
      link_.reset();
      continue;
    }
    // While the daemon is away, keep reaping and logging locally; jobs keep running until the
    // fencing deadline.
    registration_.WaitBeforeNextTry([&] {
      runner_.Poll();
      FenceIfCutOff();
      return !stop->load();
    });
  }
  // Graceful stop: take the job processes down with the agent.
  runner_.KillAll("agent stopping");
  const absl::Time give_up = clock_() + options_.kill_grace + absl::Seconds(2);
  while (runner_.AnyRunning() && clock_() < give_up) {
    runner_.Poll();
    absl::SleepFor(absl::Milliseconds(50));
  }
  if (link_) shipper_.Ship(runner_.records());
}

}  // namespace hetpool::agent
