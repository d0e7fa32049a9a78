// ClusterState's side of the agents: registration and sessions, heartbeats and leases, orders,
// process reports and what they do to jobs (exits, restarts, claims released).
#include "src/daemon/state/cluster_state.h"

#include <algorithm>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "drivers/backend_factory.h"
#include "drivers/fingerprint/fingerprint.h"
#include "drivers/fingerprint/spec_table.h"
#include "google/protobuf/util/message_differencer.h"
#include "spdlog/spdlog.h"
#include "scheduler/framework/pending_reason.h"
#include "src/common/convert.h"
#include "src/common/plan_convert.h"
#include "src/daemon/launch/launch_plan.h"
#include "src/daemon/state/job_request.h"
#include "src/daemon/state/job_validation.h"

namespace hetpool::daemon {
namespace {

std::string NewSessionId() {
  std::random_device rd;
  return absl::StrFormat("%08x%08x%08x", rd(), rd(), rd());
}

// Whether two inventories differ only in what changes all the time (utilisation, memory in use).
// Compared field by field: serialised bytes of messages with maps are not deterministic.
bool SameLastingInventory(pb::NodeInventory a, pb::NodeInventory b) {
  for (auto* inv : {&a, &b}) {
    for (auto& d : *inv->mutable_devices()) {
      d.clear_utilization_percent();
      d.clear_memory_used_mib();
    }
  }
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

}  // namespace

void ClusterState::ReleaseClaims(JobEntry& entry, const std::string& reason) {
  const JobGen key{entry.job.id(), entry.job.generation()};
  for (const auto& p : entry.job.placement()) {
    auto node = nodes_.find(p.node());
    if (node == nodes_.end()) continue;
    auto claim = node->second.claims.find(key);
    if (claim == node->second.claims.end() || !claim->second.desired) continue;
    BumpOrders(node->second);
    claim->second.desired = false;
    claim->second.kill_reason = reason;
    claim->second.undesired_at_version = node->second.orders_version;
  }
  work_pending_ = true;
}

absl::Status ClusterState::FailOrRestart(JobEntry& entry, pb::Job job, const std::string& reason,
                                         const std::string& message) {
  if (job.restart_count() < job.spec().max_restarts()) {
    job.set_restart_count(job.restart_count() + 1);
    job.set_state(pb::JOB_STATE_PENDING);
    job.set_reason("Restarting");
    job.set_message(absl::StrCat(message, "; restart ", job.restart_count(), " of ",
                                 job.spec().max_restarts()));
    AddEvent(job, reason, job.message());
  } else {
    job.set_state(pb::JOB_STATE_FAILED);
    job.set_reason(reason);
    job.set_message(message);
    *job.mutable_finished_at() = ToProtoTime(Now());
    AddEvent(job, reason, message);
  }
  if (auto s = Commit(entry, std::move(job)); !s.ok()) return s;
  ReleaseClaims(entry, absl::StrCat("gang stopped: ", message));
  return absl::OkStatus();
}

absl::Status ClusterState::OnNodeExited(JobEntry& entry, const std::string& node, int exit_code,
                                        const std::string& message) {
  pb::Job job = entry.job;
  pb::NodePlacement* p = PlacementOn(job, node);
  if (p == nullptr) return absl::OkStatus();
  p->set_started(true);
  p->set_exited(true);
  p->set_exit_code(exit_code);
  p->set_exit_message(message);
  if (exit_code != 0) {
    return FailOrRestart(entry, std::move(job), kRestartNonZeroExit,
                         absl::StrCat("node ", node, " exited with code ", exit_code, message.empty() ? "" : ": ",
                                      message));
  }
  AddEvent(job, "NodeSucceeded", absl::StrCat("node ", node, " finished"));
  const bool all_done = std::all_of(job.placement().begin(), job.placement().end(),
                                    [](const pb::NodePlacement& q) { return q.exited(); });
  if (all_done) {
    job.set_state(pb::JOB_STATE_SUCCEEDED);
    job.set_reason("Succeeded");
    job.set_message("every node exited with code 0");
    *job.mutable_finished_at() = ToProtoTime(Now());
    AddEvent(job, "Succeeded", job.message());
    work_pending_ = true;
  }
  return Commit(entry, std::move(job));
}

// ---------------------------------------------------------------------------------------------
// Agents

absl::Status ClusterState::CheckSessionLocked(const std::string& node, const std::string& session) const {
  auto it = nodes_.find(node);
  if (it == nodes_.end() || it->second.session_id.empty() || it->second.session_id != session) {
    return absl::NotFoundError(absl::StrCat("no live session ", session, " for node '", node,
                                            "'; register again"));
  }
  return absl::OkStatus();
}

void ClusterState::ApplyProcessReports(
    NodeEntry& node, const google::protobuf::RepeatedPtrField<pb::ProcessStatus>& reports,
    bool registering) {
  const std::string& node_name = node.record.name();
  std::set<JobGen> reported;
  for (const auto& r : reports) {
    const JobGen key{r.job_id(), r.generation()};
    reported.insert(key);
    auto claim_it = node.claims.find(key);
    if (claim_it == node.claims.end()) {
      if (r.running()) {
        // A process the daemon does not want here (stale generation, or a job that ended while
        // the daemon was down): hold its devices and order it stopped.
        BumpOrders(node);
        Claim& claim = node.claims[key];
        claim.device_ids.assign(r.device_ids().begin(), r.device_ids().end());
        if (auto job = jobs_.find(r.job_id()); job != jobs_.end()) {  // it holds what its job asks
          claim.cpu_milli = HostCpuMilliPerNode(job->second.job.spec());
          claim.host_memory_mib = HostMemoryMibPerNode(job->second.job.spec());
        }
        claim.desired = false;
        claim.kill_reason = "not assigned to this node by the daemon";
        claim.undesired_at_version = node.orders_version;
      }
      continue;
    }
    Claim& claim = claim_it->second;
    auto job_it = jobs_.find(r.job_id());
    if (!claim.desired || job_it == jobs_.end()) {
      if (r.exited()) {
        node.claims.erase(claim_it);
        BumpOrders(node);
        work_pending_ = true;
      }
      continue;
    }
    JobEntry& entry = job_it->second;
    // A report whose change cannot be stored is not applied: the claim stays, and the agent
    // reports the same again with its next heartbeat (it reports an exit until told to forget).
    if (r.exited()) {
      if (!OnNodeExited(entry, node_name, r.exit_code(), r.message()).ok()) continue;
      node.claims.erase(claim_it);
      BumpOrders(node);
      work_pending_ = true;
    } else if (r.running()) {
      pb::Job next = entry.job;
      pb::NodePlacement* p = PlacementOn(next, node_name);
      if (p == nullptr) continue;
      const bool ranks_news = p->global_ranks_size() == 0 && r.global_ranks_size() > 0;
      if (ranks_news) *p->mutable_global_ranks() = r.global_ranks();
      if (!p->started()) {
        p->set_started(true);
        AddEvent(next, "NodeStarted", absl::StrCat("node ", node_name, " started pid ", r.pid(),
                                                   r.note().empty() ? "" : "; ", r.note()));
        const bool all_started = std::all_of(next.placement().begin(), next.placement().end(),
                                             [](const pb::NodePlacement& q) { return q.started(); });
        if (all_started && next.state() == pb::JOB_STATE_SCHEDULED) {
          next.set_state(pb::JOB_STATE_RUNNING);
          next.set_reason("Running");
          next.set_message("every node started");
          *next.mutable_started_at() = ToProtoTime(Now());
          AddEvent(next, "Running", next.message());
        }
      } else if (!ranks_news) {
        continue;
      }
      Commit(entry, std::move(next)).IgnoreError();  // retried with the next report
    }
  }
  // Claims the agent no longer reports.
  for (auto it = node.claims.begin(); it != node.claims.end();) {
    const auto& [key, claim] = *it;
    if (reported.contains(key)) {
      ++it;
      continue;
    }
    if (!claim.desired) {
      // Gone once the agent has acted on the kill (or never started it).
      if (registering || node.applied_version >= claim.undesired_at_version) {
        it = node.claims.erase(it);
        work_pending_ = true;
        continue;
      }
      ++it;
      continue;
    }
    auto job_it = jobs_.find(key.first);
    pb::NodePlacement* p = job_it == jobs_.end() ? nullptr : PlacementOn(job_it->second.job, node_name);
    const bool should_know = registering ? (p != nullptr && p->started())
                                         : node.applied_version >= claim.created_at_version;
    if (!should_know || p == nullptr) {
      ++it;
      continue;
    }
    // The agent acted on the launch (or ran it before) but has no record: the processes are gone.
    // Unstored, the claim stays and the next report tries again.
    if (!FailOrRestart(job_it->second, job_it->second.job, kRestartProcessLost,
                       absl::StrCat("node ", node_name, " no longer has the job's processes"))
             .ok()) {
      ++it;
      continue;
    }
    it = node.claims.erase(it);
    work_pending_ = true;
  }
}

absl::StatusOr<pb::RegisterResponse> ClusterState::Register(const pb::RegisterRequest& req) {
  if (auto s = ValidateNodeName(req.node_name()); !s.ok()) return s;
  if (req.address().empty() || req.address().size() > 255) {
    return absl::InvalidArgumentError("address: required, at most 255 characters");
  }
  if (req.torchrun_path().empty() || req.torchrun_path()[0] != '/') {
    return absl::InvalidArgumentError("torchrun_path: must be an absolute path");
  }
  if (req.work_dir().empty() || req.work_dir()[0] != '/') {
    return absl::InvalidArgumentError("work_dir: must be an absolute path");
  }
  auto inventory = FromProto(req.inventory());
  if (!inventory.ok()) return inventory.status();
  if (req.labels_size() > 32) return absl::InvalidArgumentError("labels: more than 32 labels");
  for (const auto& [k, v] : req.labels()) {
    if (k.empty() || k.size() > 63 || v.size() > 256) {
      return absl::InvalidArgumentError(absl::StrCat("labels[", k, "]: key 1-63 bytes, value at most 256"));
    }
  }

  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("hetpoold is shutting down");
  const bool known = nodes_.contains(req.node_name());
  NodeEntry& node = nodes_[req.node_name()];
  const absl::Time now = Now();
  if (!known) {
    node.record.set_name(req.node_name());
    *node.record.mutable_registered_at() = ToProtoTime(now);
    node.orders_version = static_cast<uint64_t>(absl::ToUnixMicros(now));
  }
  // A changed inventory replaces the old one; claims (running jobs) are left as they are.
  node.record.set_address(req.address());
  node.record.set_torchrun_path(req.torchrun_path());
  node.record.set_work_dir(req.work_dir());
  *node.record.mutable_labels() = req.labels();
  *node.record.mutable_inventory() = req.inventory();
  node.inventory = *std::move(inventory);
  node.session_id = NewSessionId();
  node.ready = true;
  node.last_heartbeat = now;
  node.applied_version = 0;
  if (auto s = store_->PutNode(node.record); !s.ok()) {
    spdlog::error("store write for node {} failed: {}", node.record.name(), std::string(s.message()));
  }
  ApplyProcessReports(node, req.processes(), /*registering=*/true);
  BumpOrders(node);
  work_pending_ = true;
  spdlog::info("node {} registered ({} devices, {} processes reported)", req.node_name(),
               node.inventory.devices.size(), req.processes_size());
  pb::RegisterResponse response;
  response.set_session_id(node.session_id);
  response.set_lease_ttl_ms(absl::ToInt64Milliseconds(options_.lease_ttl));
  // Three heartbeats per lease at least, so that one lost beat never makes a node NotReady.
  response.set_heartbeat_interval_ms(
      absl::ToInt64Milliseconds(std::min(options_.heartbeat_interval, options_.lease_ttl / 3)));
  response.set_orphan_grace_ms(absl::ToInt64Milliseconds(options_.orphan_grace));
  return response;
}

absl::Status ClusterState::Heartbeat(const pb::HeartbeatRequest& req) {
  std::optional<NodeInventory> inventory;
  if (req.has_inventory()) {
    auto parsed = FromProto(req.inventory());
    if (!parsed.ok()) return parsed.status();  // nothing applied: the old inventory stands
    inventory = *std::move(parsed);
  }
  absl::MutexLock lock(&mu_);
  if (auto s = CheckSessionLocked(req.node_name(), req.session_id()); !s.ok()) return s;
  NodeEntry& node = nodes_.at(req.node_name());
  if (inventory) {
    // Health, memory use and cards that vanished: running jobs are left alone, the scheduler
    // stops using unhealthy cards from the next cycle on.
    for (const auto& d : inventory->devices) {
      if (!d.healthy) spdlog::warn("node {}: {} unhealthy: {}", node.record.name(), d.id, d.health_message);
    }
    node.inventory = *std::move(inventory);
    // Utilisation and memory use change on every refresh: keep them in memory (metrics, `nodes`)
    // and go no further. Only a lasting change (cards, health, links, versions) is written to the
    // store and wakes the scheduler for a pass over the whole queue: placement reads nothing else.
    const bool lasting_change = !SameLastingInventory(node.record.inventory(), req.inventory());
    *node.record.mutable_inventory() = req.inventory();
    if (lasting_change) {
      if (auto s = store_->PutNode(node.record); !s.ok()) {
        spdlog::error("store write for node {} failed: {}", node.record.name(), std::string(s.message()));
      }
      work_pending_ = true;
      Changed();
    }
  }
  node.last_heartbeat = Now();
  node.applied_version = std::min(req.applied_orders_version(), node.orders_version);
  if (req.draining()) {
    // The agent is stopping with --on-stop finish: no new work, running jobs finish. A failed
    // store write is retried with the next heartbeat, which says the same.
    if (auto s = SetDrainedLocked(node, true, "by its agent, which is stopping and lets running jobs finish");
        !s.ok()) {
      spdlog::error("node {}: {}", node.record.name(), std::string(s.message()));
    }
  }
  ApplyProcessReports(node, req.processes(), /*registering=*/false);
  return absl::OkStatus();
}

void ClusterState::ExpireLeasesLocked() {
  const absl::Time now = Now();
  for (auto& [name, node] : nodes_) {
    const absl::Duration silent = now - node.last_heartbeat;
    if (silent <= options_.lease_ttl || (!node.ready && node.claims.empty())) continue;
    // Past the lease: no new work, and the agent must register again and report what still runs.
    // Its jobs keep their claims: the agent keeps them running through a control-plane outage.
    if (node.ready) {
      spdlog::warn("node {}: lease lapsed, now NotReady; its jobs count as running for {} more", name,
                   absl::FormatDuration(options_.orphan_grace));
    }
    node.ready = false;
    node.session_id.clear();
    // Past the orphan grace as well, the agent and its fence watchdog have stopped the processes
    // (they stop them at the grace after their last answer, which came before this node's last
    // heartbeat): only now may the jobs run elsewhere.
    if (silent <= options_.lease_ttl + options_.orphan_grace) continue;
    std::vector<JobGen> lost;
    for (const auto& [key, claim] : node.claims) {
      if (claim.desired) lost.push_back(key);
    }
    // Claims go with the node, except those of jobs whose failure the store did not take: they
    // keep the node in this loop, so the next tick tries again.
    std::set<JobGen> unstored;
    for (const auto& key : lost) {
      auto job = jobs_.find(key.first);
      if (job == jobs_.end() || job->second.job.generation() != key.second) continue;
      if (!FailOrRestart(job->second, job->second.job, kRestartNodeLost,
                         absl::StrCat("node ", name, " stopped renewing its lease"))
               .ok()) {
        unstored.insert(key);
      }
    }
    std::erase_if(node.claims, [&](const auto& claim) { return !unstored.contains(claim.first); });
    BumpOrders(node);
    work_pending_ = true;
  }
}

pb::Orders ClusterState::OrdersFor(const NodeEntry& node) const {
  pb::Orders orders;
  orders.set_version(node.orders_version);
  for (const auto& [key, claim] : node.claims) {
    if (!claim.desired) {
      auto* kill = orders.add_kills();
      kill->set_job_id(key.first);
      kill->set_generation(key.second);
      kill->set_reason(claim.kill_reason);
      continue;
    }
    const auto job = jobs_.find(key.first);
    if (job == jobs_.end()) continue;
    for (const auto& plan : job->second.job.launch_plan()) {
      if (plan.node() != node.record.name()) continue;
      auto* launch = orders.add_launches();
      launch->set_job_id(key.first);
      launch->set_generation(key.second);
      *launch->mutable_plan() = plan;
      for (const auto& d : claim.device_ids) launch->add_device_ids(d);
    }
  }
  return orders;
}

absl::StatusOr<std::optional<pb::Orders>> ClusterState::WaitOrders(const std::string& node_name,
                                                                   const std::string& session,
                                                                   uint64_t after_version,
                                                                   absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  while (true) {
    if (stopping_) return absl::UnavailableError("hetpoold is shutting down");
    if (auto s = CheckSessionLocked(node_name, session); !s.ok()) return s;
    const NodeEntry& node = nodes_.at(node_name);
    if (node.orders_version > after_version) return std::optional<pb::Orders>(OrdersFor(node));
    if (Now() >= deadline) return std::optional<pb::Orders>();
    changed_.WaitWithDeadline(&mu_, deadline);
  }
}

absl::Status ClusterState::CheckLogPush(const std::string& node, const std::string& session,
                                        const std::string& job_id, uint64_t generation) const {
  absl::MutexLock lock(&mu_);
  if (auto s = CheckSessionLocked(node, session); !s.ok()) return s;
  auto job = jobs_.find(job_id);
  if (job == jobs_.end() || generation == 0 || generation > job->second.job.generation()) {
    // Distinct from the session's NOT_FOUND: the agent drops these logs instead of re-registering.
    return absl::FailedPreconditionError(absl::StrCat("no job ", job_id, " generation ", generation));
  }
  // Only a node the generation ran on may write its log: its claim (held until the agent stops
  // reporting the process, which is after its logs are pushed), or the current placement.
  // FAILED_PRECONDITION like an unknown job: the agent drops the bytes instead of retrying.
  bool placed = nodes_.at(node).claims.contains({job_id, generation});  // CheckSessionLocked found the node
  if (generation == job->second.job.generation()) {
    for (const auto& p : job->second.job.placement()) placed = placed || p.node() == node;
  }
  if (!placed) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", node, " did not run job ", job_id, " generation ", generation));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Cluster views

}  // namespace hetpool::daemon
