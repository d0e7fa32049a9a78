// ClusterState, its agents: registration, heartbeats (queued and applied in batches under one
// lock), the orders each node streams, and the check on a node's log pushes.
#include "src/daemon/state/cluster_state.h"

#include <algorithm>

#include "spdlog/spdlog.h"
#include "src/common/convert.h"
#include "src/daemon/state/job_validation.h"

namespace hetpool::daemon {

absl::StatusOr<pb::RegisterResponse> ClusterState::Register(const pb::RegisterRequest& req) {
  if (auto s = ValidateRegistration(req); !s.ok()) return s;
  auto inventory = FromProto(req.inventory());
  if (!inventory.ok()) return inventory.status();
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("hetpoold is shutting down");
  const absl::Time lease_from = SteadyNow();
  NodeEntry& node = nodes_.Register(req, *std::move(inventory), Now(), lease_from);
  nodes_.SetFault(node, req.fault());
  // The leases are next looked at when the earliest can lapse; this one's may be the earliest.
  next_lease_check_ = std::min(next_lease_check_, lease_from + options_.lease_ttl);
  reconciler_.ApplyProcessReports(node, req.processes(), /*registering=*/true);
  reconciler_.ActOnFatalSignals(node);
  nodes_.BumpOrders(node);
  wakeups_.CapacityChanged();
  spdlog::info("node {} registered ({} devices, {} processes reported)", req.node_name(), node.inventory.devices.size(),
               req.processes_size());
  pb::RegisterResponse response;
  response.set_session_id(node.session_id);
  response.set_lease_ttl_ms(absl::ToInt64Milliseconds(options_.lease_ttl));
  response.set_heartbeat_interval_ms(absl::ToInt64Milliseconds(HeartbeatInterval()));
  response.set_orphan_grace_ms(absl::ToInt64Milliseconds(options_.orphan_grace));
  return response;
}

absl::Duration ClusterState::HeartbeatInterval() {
  absl::Duration interval = options_.heartbeat_interval;
  // Three heartbeats per lease at least, so that one lost beat never makes a node NotReady.
  const absl::Duration most = options_.lease_ttl / 3;
  if (options_.max_heartbeats_per_second > 0) {
    const size_t nodes = nodes_.entries().size();
    const absl::Duration spread = absl::Seconds(static_cast<double>(nodes) / options_.max_heartbeats_per_second);
    interval = std::max(interval, spread);
    if (spread > most && !said_lease_binds_) {
      said_lease_binds_ = true;
      spdlog::warn(
          "{} nodes beating three times a lease ({}) send {:.0f} heartbeats a second, more than "
          "--max-heartbeats-per-second {:.0f}: a longer --lease-ttl would let them beat less often",
          nodes, absl::FormatDuration(options_.lease_ttl), static_cast<double>(nodes) / absl::ToDoubleSeconds(most),
          options_.max_heartbeats_per_second);
    }
  }
  return std::min(interval, most);
}

struct ClusterState::QueuedHeartbeat {
  const pb::HeartbeatRequest* request = nullptr;
  std::optional<NodeInventory> inventory;  // converted before the lock
  absl::Status status;
  absl::Duration interval;  // what the agent is told, read under the lock
  // Under heartbeats_mu_: applied (its thread returns), or its thread's turn to apply the queue.
  bool applied = false;
  bool applies_next = false;
  absl::CondVar woken;  // each waiting thread is woken once, for one of the two
};

absl::StatusOr<pb::HeartbeatResponse> ClusterState::Heartbeat(const pb::HeartbeatRequest& req) {
  QueuedHeartbeat mine;
  mine.request = &req;
  if (req.has_inventory()) {
    auto parsed = FromProto(req.inventory());
    if (!parsed.ok()) return parsed.status();  // nothing applied: the old inventory stands
    mine.inventory = *std::move(parsed);
  }
  absl::MutexLock queue(&heartbeats_mu_);
  heartbeats_.push_back(&mine);
  if (!applying_heartbeats_) {
    applying_heartbeats_ = true;
    mine.applies_next = true;
  }
  // Answered once applied: the node's orders acknowledged, its process reports taken.
  auto answer = [&mine]() -> absl::StatusOr<pb::HeartbeatResponse> {
    if (!mine.status.ok()) return mine.status;
    pb::HeartbeatResponse response;
    response.set_heartbeat_interval_ms(absl::ToInt64Milliseconds(mine.interval));
    return response;
  };
  while (!mine.applied && !mine.applies_next) mine.woken.Wait(&heartbeats_mu_);
  if (mine.applied) return answer();
  // This thread applies the queue, its own heartbeat among them (only an applier takes from it),
  // and what comes meanwhile for a few milliseconds: handing each batch to a sleeping thread
  // waited for a core every time (heartbeats p50 8-15 ms on two busy cores).
  const absl::Time until = absl::Now() + absl::Milliseconds(5);
  do {
    std::vector<QueuedHeartbeat*> batch;
    batch.swap(heartbeats_);
    heartbeats_mu_.Unlock();
    {
      absl::MutexLock lock(&mu_);
      const absl::Duration interval = HeartbeatInterval();
      for (QueuedHeartbeat* heartbeat : batch) {
        heartbeat->status = ApplyHeartbeat(*heartbeat);
        heartbeat->interval = interval;
      }
    }
    heartbeats_mu_.Lock();
    for (QueuedHeartbeat* heartbeat : batch) {
      heartbeat->applied = true;
      if (heartbeat != &mine) heartbeat->woken.Signal();  // its thread returns, and `heartbeat` with it
    }
  } while (!heartbeats_.empty() && absl::Now() < until);
  // Those that came since: the first one's thread applies them.
  if (heartbeats_.empty()) {
    applying_heartbeats_ = false;
  } else {
    heartbeats_.front()->applies_next = true;
    heartbeats_.front()->woken.Signal();
  }
  return answer();
}

absl::Status ClusterState::ApplyHeartbeat(QueuedHeartbeat& heartbeat) {
  const pb::HeartbeatRequest& req = *heartbeat.request;
  auto session = nodes_.Session(req.node_name(), req.session_id());
  if (!session.ok()) return session.status();
  NodeEntry& node = **session;
  if (heartbeat.inventory) nodes_.UpdateInventory(node, req.inventory(), *std::move(heartbeat.inventory));
  node.last_heartbeat = Now();
  node.lease_renewed_at = SteadyNow();
  node.applied_version = std::min(req.applied_orders_version(), node.orders_version);
  nodes_.SetFault(node, req.fault());
  if (req.draining()) {
    // The agent is stopping with --on-stop finish: no new work, running jobs finish. A failed
    // store write is retried with the next heartbeat, which says the same.
    if (auto s = nodes_.SetDrained(node, true, "by its agent, which is stopping and lets running jobs finish");
        !s.ok()) {
      spdlog::error("node {}: {}", node.record.name(), std::string(s.message()));
    }
  }
  reconciler_.ApplyProcessReports(node, req.processes(), /*registering=*/false);
  reconciler_.ActOnFatalSignals(node);
  return absl::OkStatus();
}

void ClusterState::WatchOrders(OrdersListener listener) {
  absl::MutexLock lock(&mu_);
  nodes_.WatchOrders(std::move(listener));
}

int ClusterState::WatchJobs(JobTable::JobListener listener) {
  absl::MutexLock lock(&mu_);
  return jobs_.WatchJobs(std::move(listener));
}

void ClusterState::UnwatchJobs(int listener) {
  absl::MutexLock lock(&mu_);
  jobs_.UnwatchJobs(listener);
}

std::vector<absl::StatusOr<std::optional<pb::Orders>>> ClusterState::OrdersSince(
    const std::vector<OrdersCursor>& cursors) const {
  std::vector<absl::StatusOr<std::optional<pb::Orders>>> out;
  out.reserve(cursors.size());
  {
    absl::MutexLock lock(&mu_);
    for (const OrdersCursor& cursor : cursors) {
      if (stopping_) {
        out.emplace_back(absl::UnavailableError("hetpoold is shutting down"));
      } else if (auto s = nodes_.CheckSession(cursor.node, cursor.session); !s.ok()) {
        out.emplace_back(s);
      } else if (const NodeEntry& node = *nodes_.Find(cursor.node); node.orders_version > cursor.after_version) {
        out.emplace_back(std::optional<pb::Orders>(reconciler_.OrdersFor(node)));
      } else {
        out.emplace_back(std::optional<pb::Orders>());
      }
    }
  }
  // An agent acts on its orders (starts, stops ranks): they leave only once the placements and
  // releases they follow from are on disk, flushed here without the lock.
  if (absl::Status synced = store_->Sync(); !synced.ok()) {
    for (auto& orders : out) orders = synced;
  }
  return out;
}

absl::Status ClusterState::CheckLogPush(const std::string& node, const std::string& session, const std::string& job_id,
                                        uint64_t generation) const {
  absl::MutexLock lock(&mu_);
  if (auto s = nodes_.CheckSession(node, session); !s.ok()) return s;
  return reconciler_.CheckLogPush(*nodes_.Find(node), job_id, generation);
}

}  // namespace hetpool::daemon
