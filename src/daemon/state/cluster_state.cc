#include "src/daemon/state/cluster_state.h"

#include <malloc.h>

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/message_differencer.h"
#include "spdlog/spdlog.h"
#include "src/common/convert.h"
#include "src/daemon/accounting/usage.h"
#include "src/daemon/launch/placement_binder.h"
#include "src/daemon/state/job_request.h"
#include "src/daemon/state/job_validation.h"
#include "src/daemon/state/pool_queries.h"

namespace hetpool::daemon {

ClusterState::ClusterState(ClusterOptions options, Store* store, scheduler::PlacementPolicy* policy)
    : options_(std::move(options)),
      store_(store),
      policy_(policy),
      wakeups_([this] { changed_.SignalAll(); }),
      jobs_(store, wakeups_, JobTableOptions{options_.max_events_per_job, options_.clock, options_.observer}),
      nodes_(store, wakeups_, PortRange{options_.rendezvous_port_min, options_.rendezvous_port_max}),
      reconciler_(jobs_, nodes_, wakeups_, LeaseOptions{options_.lease_ttl, options_.orphan_grace}),
      fair_share_(options_.queues ? std::optional<FairShareLedger>(std::in_place, *options_.queues) : std::nullopt),
      cycle_(jobs_, nodes_, policy, reconciler_, wakeups_,
             CycleOptions{options_.metax_cuda_translation, options_.quotas, options_.observer,
                          fair_share_ ? &*fair_share_ : nullptr, options_.preemption, options_.defrag,
                          options_.elastic_grow_after, absl::Minutes(1), &options_.prices}) {
  if (fair_share_) queues_file_ = options_.queues_file;
}

ClusterState::~ClusterState() { Stop(); }

bool ClusterState::store_healthy() const {
  absl::MutexLock lock(&mu_);
  return jobs_.store_healthy();
}

bool ClusterState::stopping() const {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

absl::Status ClusterState::Load() {
  const absl::Time began = absl::Now();
  // Nodes are decoded beside the jobs' reading and decoding, before the state lock: a start of a
  // large pool is 5,000 nodes' inventories and 83,000 jobs' rows. Their rows are read first (a
  // store reads one thing at a time; the nodes' are the smaller), so the two overlap.
  auto node_rows = store_->LoadNodeRows();
  if (!node_rows.ok()) return node_rows.status();
  const absl::Time node_rows_read = absl::Now();
  absl::Duration nodes_took;
  absl::StatusOr<std::vector<StoredNode>> nodes;
  std::thread node_decoder([&] {
    nodes = DecodeStoredNodes(*std::move(node_rows));
    nodes_took = absl::Now() - began;
  });
  auto rows = store_->LoadJobRows();
  const absl::Time rows_read = absl::Now();
  auto jobs = rows.ok() ? DecodeStoredJobs(*std::move(rows)) : rows.status();
  const absl::Time jobs_decoded = absl::Now();
  node_decoder.join();
  if (!nodes.ok()) return nodes.status();
  if (!jobs.ok()) return jobs.status();
  auto highest_seq = store_->HighestJobSeq();
  if (!highest_seq.ok()) return highest_seq.status();
  const absl::Time read = absl::Now();
  absl::MutexLock lock(&mu_);
  const absl::Time now = Now();
  nodes_.Load(*std::move(nodes), now);
  jobs_.Load(*std::move(jobs), *highest_seq);
  // Jobs that were running keep their claims, so their processes are re-adopted when their
  // agents register again.
  for (const auto& [id, entry] : jobs_.entries()) {
    if (!IsActive(entry.summary().state)) continue;
    const pb::Job& job = entry.job();
    for (const auto& p : job.placement()) {
      NodeEntry* node = p.exited() ? nullptr : nodes_.Find(p.node());
      if (node == nullptr) continue;
      node->claims[{job.id(), job.generation()}] = PlacedClaim(job, p, node->orders_version);
    }
  }
  // Jobs that were waiting for the jobs they stopped keep waiting for them (not stopping more);
  // by the lease and the orphan grace every node has registered again or its processes are gone.
  cycle_.RestoreHolds(now, options_.lease_ttl + options_.orphan_grace);
  if (fair_share_) {
    // What groups used before this daemon started counts in their shares, decayed. A finished
    // job is parsed for its running spans and let go: with queues configured a start still
    // parses every job that ran (the spans are in its events), but memory stays as it was.
    GroupHoldings holdings = HoldingsByGroup(nodes_, jobs_);
    fair_share_->Observe(now, std::move(holdings.capacity), std::move(holdings.held));
    pb::Job parsed;
    for (const auto& [id, entry] : jobs_.entries()) {
      if (!entry.summary().started_at) continue;
      const pb::Job& job = entry.Read(parsed);
      if (job.placement_size() == 0) continue;
      for (const UsageWindow& span : RunningSpans(job, now)) {
        fair_share_->AddPastUsage(job.spec().group(), job.spec().user(), {job.vendor(), job.placement(0).fingerprint()},
                                  CardsNeeded(job.spec()), span.since, span.until);
      }
    }
  }
  wakeups_.CapacityChanged();
  // The time before a restarted daemon can answer: what the operator (and the fleet bench) reads.
  spdlog::info(
      "loaded {} jobs and {} nodes from the store in {:.3f} s ({:.3f} s reading it: nodes {:.3f} s, and beside them "
      "job rows {:.3f} s, decoding them {:.3f} s)",
      jobs_.entries().size(), nodes_.entries().size(), absl::ToDoubleSeconds(absl::Now() - began),
      absl::ToDoubleSeconds(read - began), absl::ToDoubleSeconds(nodes_took), absl::ToDoubleSeconds(rows_read - node_rows_read),
      absl::ToDoubleSeconds(jobs_decoded - rows_read));
  return absl::OkStatus();
}

void ClusterState::Start() {
  loop_ = std::thread([this] {
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        if (stopping_) return;
        if (!wakeups_.capacity_changed() && !cycle_.HasNewJobs()) changed_.WaitWithTimeout(&mu_, options_.tick);
        if (stopping_) return;
      }
      Tick();
    }
  });
}

void ClusterState::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    changed_.SignalAll();
  }
  if (loop_.joinable()) loop_.join();
}

void ClusterState::Tick() {
  std::vector<JobTable::Retiring> retiring;
  {
    absl::MutexLock lock(&mu_);
    ReloadQueues();
    if (const absl::Time now = Now(); now >= next_lease_check_) {
      next_lease_check_ = std::max(reconciler_.ExpireLeases(now), now + kLeaseCheckEvery);
    }
    cycle_.Run(Now());
    retiring = DueForRetirement();
  }
  // The archive write goes without the lock: the first sweep of a large store moves hundreds of
  // thousands of jobs, and answers, heartbeats and registrations must not queue behind it.
  Retire(retiring);
}

std::vector<JobTable::Retiring> ClusterState::DueForRetirement() {
  if (options_.retain_finished <= absl::ZeroDuration()) return {};
  const absl::Time now = Now();
  if (now < next_retention_sweep_) return {};
  // A bounded batch per tick: a large backlog goes in steps between scheduling passes.
  constexpr size_t kRetireBatch = 500;
  std::vector<JobTable::Retiring> batch = jobs_.FinishedBefore(now - options_.retain_finished, kRetireBatch);
  if (batch.size() < kRetireBatch) next_retention_sweep_ = now + absl::Minutes(1);  // none left for now
  return batch;
}

void ClusterState::Retire(const std::vector<JobTable::Retiring>& batch) {
  if (batch.empty()) return;
  std::vector<pb::Job> jobs;
  jobs.reserve(batch.size());
  for (const auto& r : batch) jobs.push_back(r.job);
  if (absl::Status s = store_->ArchiveJobs(jobs, options_.archive_finished); !s.ok()) {
    spdlog::error("retention: {} finished jobs stay live, the store did not take them: {}", batch.size(),
                  std::string(s.message()));
    absl::MutexLock lock(&mu_);
    next_retention_sweep_ = Now() + absl::Minutes(1);
    return;
  }
  bool backlog_done = false;
  {
    absl::MutexLock lock(&mu_);
    jobs_.Forget(batch);
    backlog_done = Now() < next_retention_sweep_;
  }
  spdlog::info("retention: {} jobs that ended over {} ago {} (oldest {})", batch.size(),
               absl::FormatDuration(options_.retain_finished), options_.archive_finished ? "archived" : "dropped",
               batch.front().job.id());
  // glibc keeps what retired jobs freed for later allocations. After the first sweep of a large
  // store that is most of the table's memory: when a sweep ends (once a minute at most), give
  // it back, so that RSS follows the live set.
  if (backlog_done) malloc_trim(0);
}

void ClusterState::ReloadQueues() {
  if (!queues_file_ || !fair_share_) return;
  const auto text = queues_file_->Changed(absl::Now());
  if (!text) return;
  auto config = QueueConfig::Parse(*text);
  if (!config.ok()) {
    spdlog::error("--queues {} changed but is not valid ({}); keeping the previous queues", queues_file_->path(),
                  std::string(config.status().message()));
    return;
  }
  fair_share_->Reconfigure(*std::move(config));
  wakeups_.CapacityChanged();  // the queue order may differ: a full pass
  spdlog::info("--queues {} reloaded: {} groups", queues_file_->path(), fair_share_->config().groups.size());
}

pb::ListQueuesResponse ClusterState::ListQueues() const {
  absl::MutexLock lock(&mu_);
  pb::ListQueuesResponse out;
  out.set_fair_share(fair_share_.has_value());
  // Without --queues: the same figures for equal weights, though the queue order ignores them.
  FairShareLedger unconfigured{QueueConfig{}};
  const FairShareLedger* ledger = fair_share_ ? &*fair_share_ : &unconfigured;
  if (!fair_share_) {
    GroupHoldings holdings = HoldingsByGroup(nodes_, jobs_);
    unconfigured.Observe(Now(), std::move(holdings.capacity), std::move(holdings.held));
  }
  out.set_usage_half_life(absl::FormatDuration(ledger->config().usage_half_life));
  std::map<std::string, pb::QueueStatus> rows;
  // A row per group, named and weighted when first seen.
  auto row_of = [&](const std::string& group) -> pb::QueueStatus& {
    auto [it, added] = rows.try_emplace(group);
    if (added) {
      it->second.set_group(group);
      it->second.set_weight(ledger->config().For(group).weight);
    }
    return it->second;
  };
  std::map<std::pair<std::string, std::string>, pb::QueueStatus> user_rows;  // group, user
  auto user_row_of = [&](const std::string& group, const std::string& user) -> pb::QueueStatus& {
    auto [it, added] = user_rows.try_emplace({group, user});
    if (added) {
      it->second.set_group(group);
      it->second.set_user(user);
      it->second.set_weight(ledger->config().For(group).UserWeight(user));
    }
    return it->second;
  };
  auto fill = [](pb::QueueStatus& row, const GroupShare& share) {
    for (const auto& [selector, cards] : share.nominal) (*row.mutable_nominal())[selector] = cards;
    row.set_entitled(share.entitled);
    row.set_used(share.used);
    row.set_borrowed(share.borrowed);
    row.set_decayed_usage(share.decayed);
    row.set_share(share.share);
  };
  for (const GroupShare& g : ledger->Groups()) {
    fill(row_of(g.group), g);
    for (const GroupShare& u : g.users) fill(user_row_of(g.group, u.group), u);
  }
  for (const auto& [id, entry] : jobs_.entries()) {
    const bool pending = entry.summary().state == pb::JOB_STATE_PENDING;
    if (!pending && !IsActive(entry.summary().state)) continue;
    const pb::Job& job = entry.job();
    for (pb::QueueStatus* row : {&row_of(job.spec().group()), &user_row_of(job.spec().group(), job.spec().user())}) {
      if (pending) {
        row->set_pending_jobs(row->pending_jobs() + 1);
        row->set_waiting(row->waiting() + static_cast<double>(CardsNeeded(job.spec())) / 1000);
      } else {
        row->set_running_jobs(row->running_jobs() + 1);
      }
    }
  }
  for (auto& [key, row] : user_rows) *row_of(key.first).add_users() = std::move(row);
  for (auto& [group, row] : rows) *out.add_queues() = std::move(row);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Jobs

absl::StatusOr<pb::Job> ClusterState::Submit(pb::JobSpec spec, const std::string& request_id,
                                             const pb::PlanRow* plan) {
  if (auto s = ValidateAndNormalizeSpec(spec); !s.ok()) return s;
  if (request_id.size() > 128) return absl::InvalidArgumentError("request_id: longer than 128 bytes");
  const scheduler::PlacementRequest placement_request = ToPlacementRequest(spec);
  const RequestKey request{spec.user(), request_id};
  pb::Job job;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("hetpoold is shutting down");
    if (!request_id.empty()) {
      // A retry while the first copy is still being written waits for that write's outcome.
      auto settled = [this, &request]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !jobs_.InFlight(request); };
      mu_.Await(absl::Condition(&settled));
      if (const pb::Job* first = jobs_.ByRequest(request)) {
        // A retry sends the same job; the same key with another job is a client bug to report.
        if (!google::protobuf::util::MessageDifferencer::Equals(first->spec(), spec)) {
          return absl::AlreadyExistsError(
              absl::StrCat("request_id: ", request_id, " was used by ", first->id(), " with a different spec"));
        }
        return *first;  // a retried submission: the first one stands
      }
    }
    // Refuse what no node of the pool could ever run; an empty pool accepts (nodes may come).
    if (!nodes_.empty()) {
      if (absl::Status fits = cycle_.EverFits(placement_request); !fits.ok()) {
        return absl::FailedPreconditionError(
            absl::StrCat(placement_request.groups.empty() ? "nnodes/devices_per_node/requirements: " : "groups: ",
                         fits.message()));
      }
    }
    if (options_.quotas != nullptr) {
      if (auto s = CheckQuotaAtSubmit(*options_.quotas, nodes_, jobs_, spec); !s.ok()) return s;
    }
    job = jobs_.NewJob(std::move(spec), request_id, plan);
  }
  // Durable before it is acknowledged or visible, written outside the lock so that concurrent
  // submissions share one commit (the store groups them). On failure nothing is kept.
  const absl::Status written = WriteJobTimed(store_, options_.observer, job);
  absl::MutexLock lock(&mu_);
  jobs_.NoteStoreWrite(written);
  if (!written.ok()) {
    jobs_.Abandon(job);
    return absl::UnavailableError(absl::StrCat("job not stored: ", written.message()));
  }
  const pb::Job& stored = jobs_.Admit(std::move(job));
  cycle_.Submitted(stored.id());
  policy_->NoteSubmitted(placement_request);  // the mix Fgd weighs
  return stored;
}

absl::StatusOr<pb::Job> ClusterState::GetJob(const std::string& id) const {
  {
    absl::MutexLock lock(&mu_);
    const JobEntry* entry = jobs_.Find(id);
    if (entry != nullptr) return entry->Copy();
  }
  // Past its retention a finished job is in the store's archive (read without the lock).
  auto archived = store_->GetArchivedJob(id);
  if (!archived.ok()) return archived.status();
  if (!*archived) return absl::NotFoundError(absl::StrCat("job '", id, "' not found"));
  return **archived;
}

absl::StatusOr<pb::ListJobsResponse> ClusterState::ListJobs(const pb::ListJobsRequest& request) const {
  absl::MutexLock lock(&mu_);
  return jobs_.List(request);
}

absl::StatusOr<pb::Job> ClusterState::Cancel(const std::string& id, const std::string& reason) {
  if (reason.size() > 1024) return absl::InvalidArgumentError("reason: longer than 1024 bytes");
  absl::MutexLock lock(&mu_);
  JobEntry* entry = jobs_.Find(id);
  if (entry == nullptr) return absl::NotFoundError(absl::StrCat("job '", id, "' not found"));
  if (IsTerminal(entry->summary().state)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " already ended (", JobStateName(entry->summary().state), ")"));
  }
  const std::string message = reason.empty() ? "cancelled by request" : reason;
  pb::Job next = entry->job();
  next.set_state(pb::JOB_STATE_CANCELLED);
  next.set_reason("Cancelled");
  next.set_message(message);
  *next.mutable_finished_at() = ToProtoTime(Now());
  jobs_.AddEvent(next, "Cancelled", message);
  if (auto s = jobs_.Commit(*entry, std::move(next)); !s.ok()) return s;
  reconciler_.ReleaseClaims(*entry, "job cancelled");
  return entry->Copy();
}

absl::StatusOr<std::pair<pb::Job, uint64_t>> ClusterState::WaitJob(const std::string& id, uint64_t after_version,
                                                                   absl::Time deadline) const {
  absl::MutexLock lock(&mu_);
  while (true) {
    const JobEntry* entry = jobs_.Find(id);
    if (entry == nullptr) return absl::NotFoundError(absl::StrCat("job '", id, "' not found"));
    if (entry->version > after_version || stopping_ || Now() >= deadline) {
      return std::make_pair(entry->Copy(), entry->version);
    }
    changed_.WaitWithDeadline(&mu_, deadline);
  }
}

std::vector<pb::Job> ClusterState::JobsRunningSince(absl::Time since, const std::string& user) const {
  std::vector<pb::Job> out;
  {
    absl::MutexLock lock(&mu_);
    out = jobs_.RunningSince(since, user);
  }
  // Jobs past their retention that still ended inside the window count too.
  auto archived = store_->ArchivedJobsSince(since);
  if (!archived.ok()) {
    spdlog::error("usage: the archive could not be read; its jobs are left out: {}", std::string(archived.status().message()));
    return out;
  }
  for (pb::Job& job : *archived) {
    if (!job.has_started_at() || (!user.empty() && job.spec().user() != user)) continue;
    out.push_back(std::move(job));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Agents

absl::StatusOr<pb::RegisterResponse> ClusterState::Register(const pb::RegisterRequest& req) {
  if (auto s = ValidateRegistration(req); !s.ok()) return s;
  auto inventory = FromProto(req.inventory());
  if (!inventory.ok()) return inventory.status();
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("hetpoold is shutting down");
  const absl::Time now = Now();
  NodeEntry& node = nodes_.Register(req, *std::move(inventory), now);
  nodes_.SetFault(node, req.fault());
  // The leases are next looked at when the earliest can lapse; this one's may be the earliest.
  next_lease_check_ = std::min(next_lease_check_, now + options_.lease_ttl);
  reconciler_.ApplyProcessReports(node, req.processes(), /*registering=*/true);
  nodes_.BumpOrders(node);
  wakeups_.CapacityChanged();
  spdlog::info("node {} registered ({} devices, {} processes reported)", req.node_name(),
               node.inventory.devices.size(), req.processes_size());
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
      spdlog::warn("{} nodes beating three times a lease ({}) send {:.0f} heartbeats a second, more than "
                   "--max-heartbeats-per-second {:.0f}: a longer --lease-ttl would let them beat less often",
                   nodes, absl::FormatDuration(options_.lease_ttl),
                   static_cast<double>(nodes) / absl::ToDoubleSeconds(most), options_.max_heartbeats_per_second);
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
  return absl::OkStatus();
}

void ClusterState::WatchOrders(OrdersListener listener) {
  absl::MutexLock lock(&mu_);
  nodes_.WatchOrders(std::move(listener));
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

absl::Status ClusterState::CheckLogPush(const std::string& node, const std::string& session,
                                        const std::string& job_id, uint64_t generation) const {
  absl::MutexLock lock(&mu_);
  if (auto s = nodes_.CheckSession(node, session); !s.ok()) return s;
  return reconciler_.CheckLogPush(*nodes_.Find(node), job_id, generation);
}

// ---------------------------------------------------------------------------------------------
// The pool

std::vector<pb::Node> ClusterState::ListNodes() const {
  absl::MutexLock lock(&mu_);
  std::vector<pb::Node> out;
  for (const auto& [name, node] : nodes_.entries()) out.push_back(NodeRegistry::Snapshot(node));
  return out;
}

absl::StatusOr<pb::Node> ClusterState::GetNode(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  const NodeEntry* node = nodes_.Find(name);
  if (node == nullptr) return absl::NotFoundError(absl::StrCat("node '", name, "' not found"));
  return NodeRegistry::Snapshot(*node);
}

absl::StatusOr<std::vector<pb::DeviceView>> ClusterState::ListDevices(const std::string& node_name,
                                                                      const std::string& vendor) const {
  if (!vendor.empty() && !ParseVendor(vendor)) {
    return absl::InvalidArgumentError(
        absl::StrCat("vendor: unknown vendor '", vendor, "' (known: ", kKnownVendorList, ")"));
  }
  absl::MutexLock lock(&mu_);
  if (!node_name.empty() && nodes_.Find(node_name) == nullptr) {
    return absl::NotFoundError(absl::StrCat("node '", node_name, "' not found"));
  }
  return DeviceViews(nodes_, node_name, vendor);
}

absl::StatusOr<pb::Node> ClusterState::SetDrained(const std::string& name, bool drained) {
  absl::MutexLock lock(&mu_);
  NodeEntry* node = nodes_.Find(name);
  if (node == nullptr) return absl::NotFoundError(absl::StrCat("node '", name, "' not found"));
  if (absl::Status s = nodes_.SetDrained(*node, drained, "by an operator"); !s.ok()) return s;
  return NodeRegistry::Snapshot(*node);
}

std::vector<pb::FingerprintClass> ClusterState::ListFingerprints() const {
  absl::MutexLock lock(&mu_);
  return FingerprintClasses(nodes_);
}

std::vector<planner::PoolClass> ClusterState::PlannerPool() const {
  absl::MutexLock lock(&mu_);
  return daemon::PlannerPool(nodes_);
}

PoolSnapshot ClusterState::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return SnapshotOf(nodes_, jobs_, Now());
}

}  // namespace hetpool::daemon
