// ClusterState: the daemon's model of the pool (nodes, their devices, claims on them) and of every
// job, with the job state machine. Services call it; a background loop expires leases and runs
// scheduling cycles. Every transition is written to the Store before it is visible to callers.
// It is a facade that owns the one lock and the loop; the work is done by thread-free parts:
// JobTable (jobs, ids, the store-first commit), NodeRegistry (nodes, sessions, orders versions,
// ports), AgentReconciler (what agents' reports and silences do to jobs), SchedulingCycle (the
// queue through the policy; binding in launch/placement_binder.h) and PoolQueries (read views).
//
// Claims: a node holds a claim per (job, generation) that it should run or that may still be
// running there. A claim is "desired" while the job wants it to run; once undesired (cancel,
// failure, restart) it stays, holding its devices, until the agent reports the process gone.
// Devices are therefore never handed to a new job while old processes still use them.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "hetpool/device.h"
#include "hetpool/v1/agent.pb.h"
#include "hetpool/v1/cluster.pb.h"
#include "hetpool/v1/job.pb.h"
#include "planner/pool.h"
#include "scheduler/placement_policy.h"
#include "src/daemon/security/quota.h"
#include "src/daemon/state/agent_reconciler.h"
#include "src/daemon/state/card_suspicion.h"
#include "src/daemon/state/claim_ledger.h"
#include "src/daemon/state/job_table.h"
#include "src/daemon/state/node_registry.h"
#include "src/common/monotonic_clock.h"
#include "src/common/watched_file.h"
#include "src/daemon/sharing/fair_share.h"
#include "src/daemon/state/pool_snapshot.h"
#include "src/daemon/state/scheduling_cycle.h"
#include "src/daemon/state/state_observer.h"
#include "src/daemon/state/wakeups.h"
#include "src/daemon/store/store.h"

namespace hetpool::daemon {

namespace pb = ::hetpool::v1;

struct ClusterOptions {
  // 15 s: three beats a lease let 5,000 nodes beat every 5 s, max_heartbeats_per_second's 1,000
  // a second (a 10 s lease held them to 1,500, most of an idle daemon's CPU).
  absl::Duration lease_ttl = absl::Seconds(15);
  absl::Duration heartbeat_interval = absl::Seconds(2);  // suggested to agents
  // What the whole fleet's heartbeats may come to when nothing changes (Nomad's
  // max_heartbeats_per_second): past heartbeat_interval x this many nodes, agents are told to
  // beat less often, down to three beats a lease (never fewer: one lost beat must not make a
  // node NotReady). Heartbeats are most of an idle daemon's CPU, each a gRPC call. 0: no cap.
  double max_heartbeats_per_second = 1000;
  // How long a node past its lease keeps its jobs before they are restarted elsewhere. Agents
  // keep their jobs running that long without a daemon (and fence them then), so a daemon
  // restart, a slow load or a lost etcd quorum shorter than this kills nothing.
  absl::Duration orphan_grace = absl::Minutes(10);
  // Hardware faults (docs/reliability.md): the quarantine rule and the requeue bound.
  HardwareFaultOptions hardware;
  absl::Duration tick = absl::Milliseconds(500);  // scheduling/lease loop period
  int rendezvous_port_min = 29500;
  int rendezvous_port_max = 30499;
  size_t max_events_per_job = 200;
  bool metax_cuda_translation = false;  // a CUDA translation layer (cu-bridge) is installed on MetaX nodes
  // --prices: the MFU each class reaches, by which a job across vendors' batch is split.
  planner::PriceTable prices;
  // Stamps people read (a job's times, its events, a node's last heartbeat as shown).
  std::function<absl::Time()> clock = [] { return absl::Now(); };
  // Deadlines: leases and their grace, waits, pacing (src/common/monotonic_clock.h). Tests that
  // move `clock` move this too, and step one without the other.
  std::function<absl::Time()> monotonic_clock = MonotonicNow;
  std::shared_ptr<const QuotaTable> quotas;  // null: no quotas
  // Fair-share queues (docs/sharing.md): the config, and the file it was read from and is read
  // again from when it changes (nullopt: never re-read). No config: the policy's order alone.
  std::optional<QueueConfig> queues;
  std::optional<WatchedFile> queues_file;
  // hetpoold --preemption (docs/sharing.md): off, priority, or fair-share (needs `queues`).
  PreemptionMode preemption = PreemptionMode::kOff;
  DefragOptions defrag;  // hetpoold --defrag-after, --defrag-moves-per-hour, --defrag-window
  absl::Duration elastic_grow_after = absl::Minutes(5);  // hetpoold --elastic-grow-after
  // hetpoold --retain-finished / --archive: finished jobs leave the live table (and the store's
  // live set, which every start loads) this long after they end; kept in the store's archive,
  // which `get` and usage accounting still reach, or dropped. Zero: kept live forever.
  absl::Duration retain_finished = absl::Hours(24 * 30);
  bool archive_finished = true;
  StateObserver* observer = nullptr;  // metrics; null: nobody watches
};

class ClusterState {
 public:
  ClusterState(ClusterOptions options, Store* store, scheduler::PlacementPolicy* policy);
  ~ClusterState();
  ClusterState(const ClusterState&) = delete;
  ClusterState& operator=(const ClusterState&) = delete;

  // Loads jobs and nodes from the store. Nodes start NotReady with one lease of grace to
  // re-register; jobs that were running keep their claims so their processes are re-adopted.
  absl::Status Load();
  // Starts / stops the background loop (lease expiry, scheduling). Stop also wakes every waiter.
  void Start();
  void Stop();
  // One loop iteration; tests drive it directly with an injected clock.
  void Tick();

  // --- JobService
  // `plan`: the planner's choice for a job submitted by model, recorded in the job.
  absl::StatusOr<pb::Job> Submit(pb::JobSpec spec, const std::string& request_id, const pb::PlanRow* plan = nullptr);
  absl::StatusOr<pb::Job> GetJob(const std::string& id) const;
  absl::StatusOr<pb::ListJobsResponse> ListJobs(const pb::ListJobsRequest& request) const;
  // Cancels a job; an array with its tasks not ended; one task of an array, started or not.
  absl::StatusOr<pb::Job> Cancel(const std::string& id, const std::string& reason);
  // Returns the job once its change counter passes `after_version`, or after `patience` (then
  // the current snapshot). The pair's second member is the counter to pass next time.
  absl::StatusOr<std::pair<pb::Job, uint64_t>> WaitJob(const std::string& id, uint64_t after_version,
                                                       absl::Duration patience) const;

  // --- AgentService
  absl::StatusOr<pb::RegisterResponse> Register(const pb::RegisterRequest& request);
  absl::StatusOr<pb::HeartbeatResponse> Heartbeat(const pb::HeartbeatRequest& request);
  // `listener` hears every change of a node's orders or agent session (see OrdersListener).
  void WatchOrders(OrdersListener listener);
  // `listener` hears each job whose version moved (JobTable::WatchJobs), under the state lock,
  // until UnwatchJobs with the number WatchJobs returned.
  int WatchJobs(JobTable::JobListener listener);
  void UnwatchJobs(int listener);
  // What an order stream reads: the node's desired orders if their version passed
  // `after_version`, nullopt if not, or why the stream must end (the session is gone, the daemon
  // is stopping). For many streams under one acquisition of the lock; returned once what the
  // orders follow from is on disk (Store::Sync), or with why it cannot be.
  struct OrdersCursor {
    std::string node;
    std::string session;
    uint64_t after_version = 0;
  };
  std::vector<absl::StatusOr<std::optional<pb::Orders>>> OrdersSince(const std::vector<OrdersCursor>& cursors) const;
  // Whether logs for (job, generation) may be pushed by this session's node.
  absl::Status CheckLogPush(const std::string& node, const std::string& session, const std::string& job_id,
                            uint64_t generation) const;

  // --- ClusterService
  std::vector<pb::Node> ListNodes() const;
  absl::StatusOr<pb::Node> GetNode(const std::string& name) const;
  absl::StatusOr<std::vector<pb::DeviceView>> ListDevices(const std::string& node, const std::string& vendor) const;
  absl::StatusOr<pb::Node> SetDrained(const std::string& name, bool drained);
  // An operator returns a quarantined card (NodeRegistry::ReturnCard).
  absl::StatusOr<pb::Node> ReturnCard(const std::string& node_name, const std::string& device_id);
  std::vector<pb::FingerprintClass> ListFingerprints() const;
  // The schedulable pool by fingerprint class, with free counts and link groups, for the planner.
  std::vector<planner::PoolClass> PlannerPool() const;
  // Jobs that started and had not ended by `since` (of `user` only, when set): usage accounting.
  std::vector<pb::Job> JobsRunningSince(absl::Time since, const std::string& user) const;
  // Cards, nodes and the queue as they are now (metrics, dashboard).
  PoolSnapshot Snapshot() const;
  // Each group's fair-share queue: entitlement, use, borrowing, waiting cards, share.
  pb::ListQueuesResponse ListQueues() const;

  bool stopping() const;
  // False while the store refuses writes (disk full, etcd without quorum): changes fail with
  // UNAVAILABLE and reads go on. True again after the next write it takes.
  bool store_healthy() const;

 private:
  absl::Time Now() const { return options_.clock(); }
  absl::Time SteadyNow() const { return options_.monotonic_clock(); }  // for deadlines alone
  // A changed --queues file: new weights and entitlements (an invalid one keeps the last good).
  void ReloadQueues() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stores `entry` CANCELLED with `message` and releases its claims.
  absl::Status CancelEntry(JobEntry& entry, const std::string& message) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Retention: moves a bounded batch of finished jobs past --retain-finished into the store's
  // archive and out of the table; a tick continues where the last stopped.
  // Retention (--retain-finished): the next batch of finished jobs past it, read under the lock;
  // then stored in the archive without the lock and dropped from the table.
  std::vector<JobTable::Retiring> DueForRetirement() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Retire(const std::vector<JobTable::Retiring>& batch) ABSL_LOCKS_EXCLUDED(mu_);

  const ClusterOptions options_;
  Store* const store_;
  scheduler::PlacementPolicy* const policy_;

  // Heartbeats are applied in batches, one acquisition of the state lock for every heartbeat that
  // arrived meanwhile (whoever finds no batch being applied applies the queue, then hands the
  // next batch to the first heartbeat queued behind it; the others wait for theirs): 5,000 nodes
  // send 2,500 a second, and each taking the lock on its own put every other caller (a `list`
  // page) behind a crowd of them.
  struct QueuedHeartbeat;
  absl::Status ApplyHeartbeat(QueuedHeartbeat& heartbeat) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How often each agent is told to heartbeat: ClusterOptions' interval, stretched so that the
  // nodes known stay within max_heartbeats_per_second, and at most a third of the lease.
  absl::Duration HeartbeatInterval() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // One lock over every part; the parts themselves are thread-free.
  mutable absl::Mutex mu_;
  absl::Mutex heartbeats_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::vector<QueuedHeartbeat*> heartbeats_ ABSL_GUARDED_BY(heartbeats_mu_);  // waiting for a batch
  bool applying_heartbeats_ ABSL_GUARDED_BY(heartbeats_mu_) = false;
  mutable absl::CondVar changed_;  // signalled on every change (watchers, order streams, loop)
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Wakeups wakeups_ ABSL_GUARDED_BY(mu_);
  JobTable jobs_ ABSL_GUARDED_BY(mu_);
  NodeRegistry nodes_ ABSL_GUARDED_BY(mu_);
  AgentReconciler reconciler_ ABSL_GUARDED_BY(mu_);
  std::optional<FairShareLedger> fair_share_ ABSL_GUARDED_BY(mu_);  // before cycle_, which reads it
  std::optional<WatchedFile> queues_file_ ABSL_GUARDED_BY(mu_);
  SchedulingCycle cycle_ ABSL_GUARDED_BY(mu_);
  absl::Time next_retention_sweep_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // Leases are looked at when the earliest can lapse (ExpireLeases says when; a registration
  // brings it forward), and at most this often: the look walks every node (14% of a loaded
  // daemon's CPU at 5,000 nodes when done every tick, 7% of an idle one's every 100 ms), and a
  // lease of seconds does not need a finer clock.
  static constexpr absl::Duration kLeaseCheckEvery = absl::Milliseconds(100);
  absl::Time next_lease_check_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool said_lease_binds_ ABSL_GUARDED_BY(mu_) = false;  // the log has said the lease keeps beats above the cap

  std::thread loop_;  // last member: joined before the state it uses goes away
};

}  // namespace hetpool::daemon
