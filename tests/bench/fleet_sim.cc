#include "tests/bench/fleet_sim.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "drivers/backend_factory.h"
#include "nlohmann/json.hpp"
#include "src/common/convert.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/async_stream.h"
#include "src/agent/daemon_channel.h"
#include "src/common/orders_parts.h"

namespace hetpool::bench {

namespace {

enum class StreamOp { kStart, kRead, kFinish };

using ProcessKey = std::pair<std::string, uint64_t>;  // (job, generation)

// A heartbeat the daemon could not answer now (down, restarting, busy) is sent again at the
// next interval with the session kept; any other refusal means the daemon no longer knows the
// session: register again. (As hetpool-agent's Session::Serve does.)
bool SessionLost(const grpc::Status& status) {
  return !status.ok() && status.error_code() != grpc::StatusCode::UNAVAILABLE &&
         status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED;
}

// Registering again after a failure waits this long, doubled after each failure up to 5 s, as
// hetpool-agent's Session::Run does: a fleet must not hammer a daemon that is starting.
constexpr absl::Duration kFirstBackoff = absl::Milliseconds(200);
constexpr absl::Duration kMaxBackoff = absl::Seconds(5);
// How often a node whose daemon is unreachable asks its channel whether it connected: as often as
// hetpool-agent's loop does (agent::WaitForDaemon's period).
constexpr absl::Duration kChannelPoll = absl::Milliseconds(200);

// The period the daemon announces (at registration and in every heartbeat's answer, which
// spreads a growing fleet's beats), at least 100 ms.
absl::Duration HeartbeatPeriod(int64_t announced_ms) {
  return absl::Milliseconds(std::max<int64_t>(100, announced_ms));
}

}  // namespace

struct FleetSimulator::Node {
  struct Tag {
    Node* node;
    StreamOp op;
  };
  SimNodeSpec spec;
  size_t slice = 0;  // the heartbeat thread that serves it
  pb::AgentService::Stub* stub = nullptr;
  grpc::Channel* channel = nullptr;  // the stub's
  Tag start_tag{this, StreamOp::kStart}, read_tag{this, StreamOp::kRead}, finish_tag{this, StreamOp::kFinish};

  absl::Mutex mu;
  std::string session_id ABSL_GUARDED_BY(mu);
  bool registered_once ABSL_GUARDED_BY(mu) = false;
  bool lost ABSL_GUARDED_BY(mu) = true;  // no session yet: register
  absl::Duration interval ABSL_GUARDED_BY(mu) = absl::Seconds(2);
  absl::Time next_heartbeat ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  bool dirty ABSL_GUARDED_BY(mu) = false;  // processes changed: report at once
  // Not before: registering again after a refusal, reopening a stream that ended.
  absl::Time retry_at ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  absl::Duration backoff ABSL_GUARDED_BY(mu) = kFirstBackoff;
  // The last registration did not reach the daemon: retry once the channel connects, as
  // hetpool-agent does (agent::WaitForDaemon), not only when the backoff ends.
  bool unreachable ABSL_GUARDED_BY(mu) = false;
  bool cancelled_by_us ABSL_GUARDED_BY(mu) = false;  // the stream of an old session, to reopen
  uint64_t applied_version ABSL_GUARDED_BY(mu) = 0;
  std::map<ProcessKey, Process> processes ABSL_GUARDED_BY(mu);
  std::set<ProcessKey> unreported_running ABSL_GUARDED_BY(mu);  // to stamp once a heartbeat lands
  // A heartbeat is on its way (at most one per node, as an agent sends them): the next waits for
  // its answer.
  bool heartbeat_in_flight ABSL_GUARDED_BY(mu) = false;
  OrdersAssembler assembler ABSL_GUARDED_BY(mu);

  // The order stream, driven by the reader thread through the completion queue.
  bool stream_open ABSL_GUARDED_BY(mu) = false;
  std::unique_ptr<grpc::ClientContext> stream_ctx ABSL_GUARDED_BY(mu);
  std::unique_ptr<grpc::ClientAsyncReader<pb::Orders>> reader ABSL_GUARDED_BY(mu);
  pb::Orders incoming;  // written by gRPC between Read and its completion
  grpc::Status finish_status;
};

FleetSimulator::FleetSimulator(FleetOptions options, std::vector<SimNodeSpec> nodes) : options_(std::move(options)) {
  auto credentials = options_.credentials ? options_.credentials : grpc::InsecureChannelCredentials();
  for (int i = 0; i < std::max(1, options_.channels); ++i) {
    // The agent's own reconnect settings, and a channel of its own per slot: gRPC would otherwise
    // share one connection among them.
    grpc::ChannelArguments args = agent::DaemonChannelArguments();
    args.SetInt("hetpool.fleet.channel", i);
    channels_.push_back(grpc::CreateCustomChannel(options_.daemon, credentials, args));
    stubs_.push_back(pb::AgentService::NewStub(channels_.back()));
  }
  heartbeat_threads_ = options_.heartbeat_threads > 0 ? options_.heartbeat_threads
                                                      : std::clamp(static_cast<int>(nodes.size() / 40), 32, 256);
  for (int t = 0; t < heartbeat_threads_; ++t) slices_.push_back(std::make_unique<Slice>());
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto node = std::make_unique<Node>();
    node->spec = std::move(nodes[i]);
    node->slice = i % static_cast<size_t>(heartbeat_threads_);
    node->stub = stubs_[i % stubs_.size()].get();
    node->channel = channels_[i % channels_.size()].get();
    nodes_.push_back(std::move(node));
  }
}

FleetSimulator::~FleetSimulator() { Stop(); }

absl::Status FleetSimulator::Start(absl::Duration timeout) {
  reader_ = std::thread([this] { ReadLoop(); });
  for (int t = 0; t < heartbeat_threads_; ++t) {
    heartbeaters_.emplace_back([this, t] { HeartbeatLoop(t); });
  }
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    size_t registered = 0;
    for (auto& node : nodes_) {
      absl::MutexLock lock(&node->mu);
      registered += node->registered_once ? 1 : 0;
    }
    if (registered == nodes_.size()) return absl::OkStatus();
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          registered, " of ", nodes_.size(), " simulated nodes registered in ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

void FleetSimulator::Stop() {
  if (stopping_.exchange(true)) return;
  for (auto& slice : slices_) Wake(*slice);
  for (auto& t : heartbeaters_) t.join();
  heartbeaters_.clear();
  {
    // Heartbeats still on their way answer within their deadline; their callbacks touch nodes.
    absl::MutexLock lock(&calls_mu_);
    calls_mu_.Await(absl::Condition(
        +[](int* n) { return *n == 0; }, &calls_in_flight_));
  }
  // Cancel every open stream; the reader thread drains their completions, then the queue.
  for (auto& node : nodes_) {
    absl::MutexLock lock(&node->mu);
    if (node->stream_open && node->stream_ctx) node->stream_ctx->TryCancel();
  }
  while (true) {
    bool open = false;
    for (auto& node : nodes_) {
      absl::MutexLock lock(&node->mu);
      open = open || node->stream_open;
    }
    if (!open) break;
    absl::SleepFor(absl::Milliseconds(5));
  }
  cq_.Shutdown();
  if (reader_.joinable()) reader_.join();
}

std::vector<LaunchRecord> FleetSimulator::Launches() const {
  absl::MutexLock lock(&launches_mu_);
  return launches_;
}

int FleetSimulator::RunningProcesses() const {
  int n = 0;
  for (const auto& node : nodes_) {
    absl::MutexLock lock(&node->mu);
    for (const auto& [key, p] : node->processes) n += p.exited ? 0 : 1;
  }
  return n;
}

bool FleetSimulator::RegisterNode(Node& node) {
  auto failed = [&](bool unreachable) {
    failed_calls_.fetch_add(1);
    absl::MutexLock lock(&node.mu);
    node.unreachable = unreachable;
    node.retry_at = absl::Now() + node.backoff;
    node.backoff = std::min(node.backoff * 2, kMaxBackoff);
    return false;
  };
  // gRPC fails a call on a channel in TRANSIENT_FAILURE at once, without sending it: a real agent
  // pays for building its request on its own machine, the simulator on the daemon's cores (5,000
  // inventories copied and serialized a few times each while a restarted daemon loads).
  if (node.channel->GetState(/*try_to_connect=*/true) == GRPC_CHANNEL_TRANSIENT_FAILURE) return failed(true);
  pb::RegisterRequest req;
  req.set_node_name(node.spec.name);
  req.set_address("127.0.0.1");
  *req.mutable_inventory() = node.spec.inventory;
  req.set_torchrun_path("/bin/false");  // never run: the processes are simulated
  req.set_work_dir("/tmp");
  {
    absl::MutexLock lock(&node.mu);
    for (const auto& [key, p] : node.processes) {
      pb::ProcessStatus* s = req.add_processes();
      s->set_job_id(key.first), s->set_generation(key.second);
      s->set_running(!p.exited), s->set_exited(p.exited), s->set_exit_code(p.exit_code);
      for (const auto& id : p.device_ids) s->add_device_ids(id);
    }
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  pb::RegisterResponse resp;
  const grpc::Status status = node.stub->Register(&ctx, req, &resp);
  if (!status.ok()) {
    return failed((status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                   status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) &&
                  node.channel->GetState(/*try_to_connect=*/false) != GRPC_CHANNEL_READY);
  }
  bool reopen = false;
  {
    absl::MutexLock lock(&node.mu);
    if (node.registered_once) reregistrations_.fetch_add(1);
    node.registered_once = true;
    node.lost = false;
    node.unreachable = false;
    node.backoff = kFirstBackoff;
    node.session_id = resp.session_id();
    node.interval = HeartbeatPeriod(resp.heartbeat_interval_ms());
    node.next_heartbeat = absl::Now() + node.interval;
    // A stream of the old session is cancelled; its completion opens the new one.
    if (node.stream_open) {
      node.cancelled_by_us = true;
      node.stream_ctx->TryCancel();
    } else {
      reopen = true;
    }
  }
  if (reopen) OpenStream(node);
  return true;
}

void FleetSimulator::OpenStream(Node& node) {
  absl::MutexLock lock(&node.mu);
  if (node.stream_open || stopping_.load() || node.lost) return;
  pb::StreamOrdersRequest req;
  req.set_session_id(node.session_id);
  req.set_node_name(node.spec.name);
  // The reader lives in its call's arena, which the context owns: the old reader goes first.
  node.reader.reset();
  node.stream_ctx = std::make_unique<grpc::ClientContext>();
  node.reader = node.stub->PrepareAsyncStreamOrders(node.stream_ctx.get(), req, &cq_);
  node.stream_open = true;
  node.reader->StartCall(&node.start_tag);
}

void FleetSimulator::ReadLoop() {
  void* raw = nullptr;
  bool ok = false;
  while (cq_.Next(&raw, &ok)) {
    auto* tag = static_cast<Node::Tag*>(raw);
    Node& node = *tag->node;
    switch (tag->op) {
      case StreamOp::kStart:
      case StreamOp::kRead: {
        if (tag->op == StreamOp::kRead && ok) ApplyOrders(node, node.incoming);
        absl::MutexLock lock(&node.mu);
        if (ok) {
          node.reader->Read(&node.incoming, &node.read_tag);
        } else {
          node.reader->Finish(&node.finish_status, &node.finish_tag);
        }
        break;
      }
      case StreamOp::kFinish: {
        // The stream ends when the daemon goes or ends the session: the heartbeat thread
        // registers again after the backoff (a restarted daemon has forgotten the session). The
        // stream of an old session, cancelled after registering again, is reopened instead.
        {
          absl::MutexLock lock(&node.mu);
          node.stream_open = false;
          if (!node.cancelled_by_us) node.lost = true;
          node.cancelled_by_us = false;
          node.retry_at = absl::Now() + node.backoff;
        }
        Wake(*slices_[node.slice]);  // its heartbeat thread may sleep past the retry
        break;
      }
    }
  }
}

void FleetSimulator::Wake(Slice& slice) {
  absl::MutexLock lock(&slice.mu);
  slice.kicked = true;
  slice.wake.Signal();
}

void FleetSimulator::ApplyOrders(Node& node, const pb::Orders& part) {
  absl::ReleasableMutexLock lock(&node.mu);
  std::optional<pb::Orders> orders = node.assembler.Add(part);
  if (!orders) return;
  const absl::Time now = absl::Now();
  std::set<ProcessKey> desired;
  for (const pb::LaunchOrder& launch : orders->launches()) {
    const ProcessKey key{launch.job_id(), launch.generation()};
    desired.insert(key);
    if (node.processes.contains(key)) continue;
    Process p;
    p.generation = launch.generation();
    p.device_ids.assign(launch.device_ids().begin(), launch.device_ids().end());
    if (options_.fate) {
      p.fate = options_.fate(node.spec.name, launch, now);
    } else {
      auto env = launch.plan().env().find("FLEET_SIM_DURATION_S");
      double seconds = 0;
      if (env != launch.plan().env().end() && absl::SimpleAtod(env->second, &seconds) && seconds > 0) {
        p.fate.runs = absl::Seconds(seconds);
      }
    }
    if (p.fate.runs != absl::InfiniteDuration()) p.ends = now + p.fate.runs;
    node.processes.emplace(key, std::move(p));
    node.unreported_running.insert(key);
    node.dirty = true;
    absl::MutexLock records(&launches_mu_);
    if (!launch_index_.contains(key)) {
      launch_index_[key] = launches_.size();
      launches_.push_back({key.first, key.second, node.spec.name, now, absl::InfiniteFuture()});
    }
  }
  for (const pb::KillOrder& kill : orders->kills()) {
    auto it = node.processes.find({kill.job_id(), kill.generation()});
    if (it == node.processes.end() || it->second.exited) continue;
    it->second.exited = true, it->second.exit_code = 143;
    kills_.fetch_add(1);
    it->second.message = absl::StrCat("killed by signal 15 (", kill.reason(), ")");
    node.dirty = true;
  }
  // What the daemon no longer desires is gone (an agent stops it and forgets it).
  for (auto it = node.processes.begin(); it != node.processes.end();) {
    if (desired.contains(it->first)) {
      ++it;
    } else {
      node.unreported_running.erase(it->first);
      it = node.processes.erase(it);
      node.dirty = true;
    }
  }
  node.applied_version = orders->version();
  const bool report = node.dirty;
  lock.Release();
  if (report) Wake(*slices_[node.slice]);
}

// One heartbeat on its way: what gRPC reads and writes until the answer, and what to stamp then.
struct FleetSimulator::HeartbeatCall {
  grpc::ClientContext ctx;
  pb::HeartbeatRequest req;
  pb::HeartbeatResponse resp;
  std::vector<ProcessKey> stamping;
};

bool FleetSimulator::SendHeartbeat(Node& node) {
  auto call = std::make_unique<HeartbeatCall>();
  {
    absl::MutexLock lock(&node.mu);
    if (node.heartbeat_in_flight) return false;
    pb::HeartbeatRequest& req = call->req;
    req.set_session_id(node.session_id);
    req.set_node_name(node.spec.name);
    req.set_applied_orders_version(node.applied_version);
    for (const auto& [key, p] : node.processes) {
      pb::ProcessStatus* s = req.add_processes();
      s->set_job_id(key.first), s->set_generation(key.second);
      s->set_running(!p.exited), s->set_exited(p.exited), s->set_exit_code(p.exit_code);
      s->set_message(p.message);
      s->set_pid(100000 + static_cast<int64_t>(key.second));
      for (const auto& id : p.device_ids) s->add_device_ids(id);
      if (p.exited && p.exit_code != 0 && !p.fate.last_lines.empty()) {
        pb::RankFailure* failure = s->mutable_rank_failure();
        failure->set_global_rank(p.fate.local_rank), failure->set_local_rank(p.fate.local_rank);
        failure->set_exit_code(p.exit_code);
        for (const std::string& line : p.fate.last_lines) failure->add_last_lines(line);
      }
    }
    call->stamping.assign(node.unreported_running.begin(), node.unreported_running.end());
    node.dirty = false;
    node.next_heartbeat = absl::Now() + node.interval;
    node.heartbeat_in_flight = true;
  }
  {
    absl::MutexLock lock(&calls_mu_);
    ++calls_in_flight_;
  }
  call->ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  // Sent without waiting for the answer, as 5,000 agents on their own machines would: a slice's
  // nodes do not queue behind one another's calls (which made the daemon's latency the
  // simulator's, and hid what batching the daemon's work does to it).
  HeartbeatCall* raw = call.release();
  node.stub->async()->Heartbeat(&raw->ctx, &raw->req, &raw->resp, [this, &node, raw](grpc::Status status) {
    HeartbeatAnswered(node, std::unique_ptr<HeartbeatCall>(raw), status);
  });
  return true;
}

void FleetSimulator::HeartbeatAnswered(Node& node, std::unique_ptr<HeartbeatCall> call, const grpc::Status& status) {
  heartbeats_.fetch_add(1);
  const absl::Time now = absl::Now();
  bool wake = false;
  {
    absl::MutexLock lock(&node.mu);
    node.heartbeat_in_flight = false;
    if (!status.ok()) {
      failed_calls_.fetch_add(1);
      node.next_heartbeat = now + node.interval;  // reported again then, not at once
      // Only for the session it was sent in: the node may have registered again meanwhile.
      if (SessionLost(status) && call->req.session_id() == node.session_id) node.lost = true;
    } else {
      for (const ProcessKey& key : call->stamping) node.unreported_running.erase(key);
      // As the agent does: the daemon spreads a growing fleet's beats (--max-heartbeats-per-second).
      if (call->resp.heartbeat_interval_ms() > 0) {
        node.interval = HeartbeatPeriod(call->resp.heartbeat_interval_ms());
      }
    }
    wake = node.dirty || node.lost;  // changed while the call was out: its thread sends again
  }
  if (status.ok()) {
    absl::MutexLock records(&launches_mu_);
    for (const ProcessKey& key : call->stamping) {
      auto it = launch_index_.find(key);
      if (it != launch_index_.end() && launches_[it->second].reported_running == absl::InfiniteFuture()) {
        launches_[it->second].reported_running = now;
      }
    }
  }
  if (wake) Wake(*slices_[node.slice]);
  absl::MutexLock lock(&calls_mu_);
  --calls_in_flight_;
}

void FleetSimulator::HeartbeatLoop(int slice) {
  const size_t threads = static_cast<size_t>(heartbeat_threads_);
  Slice& wakeups = *slices_[static_cast<size_t>(slice)];
  while (!stopping_.load()) {
    bool sent = false;
    absl::Time next = absl::Now() + kMaxBackoff;  // the earliest thing due in the slice after this round
    std::map<grpc::Channel*, bool> connected;     // asked once a round, for the nodes that wait on it
    auto connects = [&](grpc::Channel* channel) {
      auto [it, fresh] = connected.emplace(channel, false);
      if (fresh) it->second = channel->GetState(/*try_to_connect=*/true) == GRPC_CHANNEL_READY;
      return it->second;
    };
    for (size_t i = static_cast<size_t>(slice); i < nodes_.size() && !stopping_.load(); i += threads) {
      Node& node = *nodes_[i];
      bool lost = false, due = false, needs_stream = false;
      {
        absl::MutexLock lock(&node.mu);
        const absl::Time now = absl::Now();
        for (auto& [key, p] : node.processes) {
          if (p.exited) continue;
          if (p.ends <= now) {
            p.exited = true, p.exit_code = p.fate.exit_code;
            node.dirty = true;
          } else {
            next = std::min(next, p.ends);
          }
        }
        const bool may_retry = now >= node.retry_at || (node.lost && node.unreachable && connects(node.channel));
        lost = node.lost && may_retry;
        due = !node.lost && !node.heartbeat_in_flight && (node.dirty || now >= node.next_heartbeat);
        needs_stream = !node.lost && !node.stream_open && may_retry;
        if (node.lost) {
          next = std::min(next, node.unreachable ? now + kChannelPoll : node.retry_at);
        } else {
          next = std::min(next, node.next_heartbeat);
          if (!node.stream_open) next = std::min(next, node.retry_at);
        }
      }
      if (lost) {
        sent = RegisterNode(node) || sent;
        continue;
      }
      if (needs_stream) OpenStream(node);
      if (due) SendHeartbeat(node);
    }
    if (sent) continue;  // a registration took time: look again at once
    // Nothing was due: sleep until something is, or until orders change a node's processes (a
    // finished or started process is reported at once). Polling every slice every 5 ms instead
    // cost the simulator more than a core while a restarted daemon was loading.
    absl::MutexLock lock(&wakeups.mu);
    if (!wakeups.kicked)
      wakeups.wake.WaitWithDeadline(&wakeups.mu, std::max(next, absl::Now() + absl::Milliseconds(1)));
    wakeups.kicked = false;
  }
}

// One node's inventory as the product's own discovery reads it: the sim backend over an
// inventory file of `cards` H100s on one NVSwitch, fingerprinted with the spec table.
absl::StatusOr<pb::NodeInventory> TemplateInventory(int cards, const std::string& dir) {
  nlohmann::json devices = nlohmann::json::array();
  for (int i = 0; i < cards; ++i) {
    nlohmann::json links = nlohmann::json::array();
    for (int j = 0; j < cards; ++j) {
      if (j != i) links.push_back({{"peer", absl::StrCat("nvidia", j)}, {"kind", "nvlink"}, {"count", 18}});
    }
    devices.push_back({{"vendor", "nvidia"},
                       {"model", "H100-SXM"},
                       {"memory_mib", 81559},
                       {"pci_bus_id", absl::StrFormat("00000000:%02x:00.0", 0x17 + i)},
                       {"numa_node", i * 2 / cards},
                       {"architecture", "sm_90"},
                       {"uuid", absl::StrFormat("GPU-fleet-%04d", i)},
                       {"links", links}});
  }
  const std::string path = dir + "/template-inventory.json";
  std::ofstream(path)
      << nlohmann::json{{"hostname", "template"}, {"cpus", 192}, {"memory_mib", 2097152}, {"devices", devices}}.dump();
  drivers::BackendOptions backend;
  backend.names = {"sim"};
  backend.sim_inventory_path = path;
  auto backends = drivers::CreateBackends(backend);
  if (!backends.ok()) return backends.status();
  auto inventory = drivers::CollectInventory(*backends);
  if (!inventory.ok()) return inventory.status();
  return ToProto(*inventory);
}

std::vector<SimNodeSpec> FleetNodes(const pb::NodeInventory& base, int count) {
  std::vector<SimNodeSpec> nodes;
  nodes.reserve(count);
  for (int n = 0; n < count; ++n) {
    SimNodeSpec spec;
    spec.name = absl::StrFormat("sim-%05d", n);
    spec.inventory = base;
    spec.inventory.set_hostname(spec.name);
    for (pb::Device& d : *spec.inventory.mutable_devices()) d.set_uuid(absl::StrCat(d.uuid(), "-", n));
    nodes.push_back(std::move(spec));
  }
  return nodes;
}

pb::JobSpec SimTrainingSpec(const std::string& name, const std::string& user, int cards) {
  pb::JobSpec spec;
  spec.set_name(name);
  spec.set_user(user);
  spec.mutable_python()->set_script("train.py");
  spec.set_working_dir("/tmp");
  spec.set_nnodes(1);
  spec.set_devices_per_node(cards);
  return spec;
}

}  // namespace hetpool::bench
