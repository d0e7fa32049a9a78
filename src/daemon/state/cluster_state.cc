#include "src/daemon/state/cluster_state.h"

#include <malloc.h>

#include <algorithm>
#include <thread>

#include "spdlog/spdlog.h"
#include "src/common/convert.h"
#include "src/daemon/accounting/usage.h"
#include "src/daemon/launch/placement_binder.h"
#include "src/daemon/state/job_request.h"
#include "src/daemon/state/pool_queries.h"

namespace hetpool::daemon {

ClusterState::ClusterState(ClusterOptions options, Store* store, scheduler::PlacementPolicy* policy)
    : options_(std::move(options)),
      store_(store),
      policy_(policy),
      wakeups_([this] { changed_.SignalAll(); }),
      jobs_(store, wakeups_, JobTableOptions{options_.max_events_per_job, options_.clock, options_.observer}),
      nodes_(store, wakeups_, PortRange{options_.rendezvous_port_min, options_.rendezvous_port_max}),
      reconciler_(jobs_, nodes_, wakeups_, LeaseOptions{options_.lease_ttl, options_.orphan_grace}, options_.hardware),
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
  nodes_.Load(*std::move(nodes), now, SteadyNow());
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
      absl::ToDoubleSeconds(read - began), absl::ToDoubleSeconds(nodes_took),
      absl::ToDoubleSeconds(rows_read - node_rows_read), absl::ToDoubleSeconds(jobs_decoded - rows_read));
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
    if (const absl::Time now = SteadyNow(); now >= next_lease_check_) {
      next_lease_check_ = std::max(reconciler_.ExpireLeases(now), now + kLeaseCheckEvery);
    }
    // Array tasks join the queue as room frees (max_running), each as a new submission would.
    for (const std::string& released : jobs_.ReleaseArrayTasks()) cycle_.Submitted(released);
    cycle_.Run(Now());
    retiring = DueForRetirement();
  }
  // The archive write goes without the lock: the first sweep of a large store moves hundreds of
  // thousands of jobs, and answers, heartbeats and registrations must not queue behind it.
  Retire(retiring);
}

std::vector<JobTable::Retiring> ClusterState::DueForRetirement() {
  if (options_.retain_finished <= absl::ZeroDuration()) return {};
  if (SteadyNow() < next_retention_sweep_) return {};
  // A bounded batch per tick: a large backlog goes in steps between scheduling passes. Jobs are
  // old by their stamps (wall time); the sweeps are paced on the monotonic clock.
  constexpr size_t kRetireBatch = 500;
  std::vector<JobTable::Retiring> batch = jobs_.FinishedBefore(Now() - options_.retain_finished, kRetireBatch);
  if (batch.size() < kRetireBatch) next_retention_sweep_ = SteadyNow() + absl::Minutes(1);  // none left for now
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
    next_retention_sweep_ = SteadyNow() + absl::Minutes(1);
    return;
  }
  bool backlog_done = false;
  {
    absl::MutexLock lock(&mu_);
    jobs_.Forget(batch);
    backlog_done = SteadyNow() < next_retention_sweep_;
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
  const auto text = queues_file_->Changed(SteadyNow());
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

}  // namespace hetpool::daemon
