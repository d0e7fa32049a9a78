// ClusterState: the daemon's model of the pool (nodes, their devices, claims on them) and of every
// job, with the job state machine. Services call it; a background loop expires leases and runs
// scheduling cycles. Every transition is written to the Store before it is visible to callers.
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
#include "src/daemon/state/claim_ledger.h"
#include "src/daemon/state/pool_snapshot.h"
#include "src/daemon/state/quota_ledger.h"
#include "src/daemon/state/state_observer.h"
#include "src/daemon/store/store.h"

namespace hetpool::daemon {

namespace pb = ::hetpool::v1;

struct ClusterOptions {
  absl::Duration lease_ttl = absl::Seconds(10);
  absl::Duration heartbeat_interval = absl::Seconds(2);  // suggested to agents
  // How long a node past its lease keeps its jobs before they are restarted elsewhere. Agents
  // keep their jobs running that long without a daemon (and fence them then), so a daemon
  // restart, a slow load or a lost etcd quorum shorter than this kills nothing.
  absl::Duration orphan_grace = absl::Minutes(10);
  absl::Duration tick = absl::Milliseconds(500);         // scheduling/lease loop period
  int rendezvous_port_min = 29500;
  int rendezvous_port_max = 30499;
  size_t max_events_per_job = 200;
  bool metax_cuda_translation = false;  // a CUDA translation layer (cu-bridge) is installed on MetaX nodes
  std::function<absl::Time()> clock = [] { return absl::Now(); };
  std::shared_ptr<const QuotaTable> quotas;  // null: no quotas
  StateObserver* observer = nullptr;         // metrics; null: nobody watches
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
  absl::StatusOr<pb::Job> Submit(pb::JobSpec spec, const std::string& request_id,
                                 const pb::PlanRow* plan = nullptr);
  absl::StatusOr<pb::Job> GetJob(const std::string& id) const;
  absl::StatusOr<pb::ListJobsResponse> ListJobs(const pb::ListJobsRequest& request) const;
  absl::StatusOr<pb::Job> Cancel(const std::string& id, const std::string& reason);
  // Returns the job once its change counter passes `after_version`, or at `deadline` (then the
  // current snapshot). The pair's second member is the counter to pass next time.
  absl::StatusOr<std::pair<pb::Job, uint64_t>> WaitJob(const std::string& id, uint64_t after_version,
                                                       absl::Time deadline) const;

  // --- AgentService
  absl::StatusOr<pb::RegisterResponse> Register(const pb::RegisterRequest& request);
  absl::Status Heartbeat(const pb::HeartbeatRequest& request);
  // The node's desired orders once their version passes `after_version`; nullopt at the deadline.
  absl::StatusOr<std::optional<pb::Orders>> WaitOrders(const std::string& node,
                                                       const std::string& session,
                                                       uint64_t after_version,
                                                       absl::Time deadline) const;
  // Whether logs for (job, generation) may be pushed by this session's node.
  absl::Status CheckLogPush(const std::string& node, const std::string& session,
                            const std::string& job_id, uint64_t generation) const;

  // --- ClusterService
  std::vector<pb::Node> ListNodes() const;
  absl::StatusOr<pb::Node> GetNode(const std::string& name) const;
  absl::StatusOr<std::vector<pb::DeviceView>> ListDevices(const std::string& node,
                                                          const std::string& vendor) const;
  absl::StatusOr<pb::Node> SetDrained(const std::string& name, bool drained);
  std::vector<pb::FingerprintClass> ListFingerprints() const;
  // The schedulable pool by fingerprint class, with free counts and link groups, for the planner.
  std::vector<planner::PoolClass> PlannerPool() const;
  // Jobs that started and had not ended by `since` (of `user` only, when set): usage accounting.
  std::vector<pb::Job> JobsRunningSince(absl::Time since, const std::string& user) const;
  // Cards, nodes and the queue as they are now (metrics, dashboard).
  PoolSnapshot Snapshot() const;

  bool stopping() const;
  // False while the store refuses writes (disk full, etcd without quorum): changes fail with
  // UNAVAILABLE and reads go on. True again after the next write it takes.
  bool store_healthy() const;

 private:
  struct NodeEntry {
    pb::Node record;  // persisted fields: name, address, inventory, drained, torchrun, work_dir
    NodeInventory inventory;
    std::string session_id;
    bool ready = false;
    absl::Time last_heartbeat;
    uint64_t orders_version = 0;
    uint64_t applied_version = 0;
    Claims claims;  // claim_ledger.h
  };
  struct JobEntry {
    pb::Job job;
    uint64_t version = 1;
  };

  absl::Time Now() const { return options_.clock(); }
  void Changed() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void BumpOrders(NodeEntry& node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckSessionLocked(const std::string& node, const std::string& session) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Stores `next` as the job's state, and only then makes it the state in memory (and tells
  // watchers). UNAVAILABLE, with nothing changed, when the store refuses it.
  absl::Status Commit(JobEntry& entry, pb::Job next) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WriteJob(const pb::Job& job);  // the store write, timed for the observer
  // Keeps store_healthy_ and logs once when the store starts, and stops, refusing writes.
  void NoteStoreWriteLocked(const absl::Status& written) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddEvent(pb::Job& job, std::string reason, std::string message) const;
  pb::Node NodeSnapshot(const NodeEntry& node) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  pb::NodePlacement* PlacementOn(pb::Job& job, const std::string& node) const;
  // Drains or undrains, stored before it counts (on a failed write nothing changes).
  absl::Status SetDrainedLocked(NodeEntry& node, bool drained, absl::string_view why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Job state machine.
  // All pending jobs, or (`only`) just those ids, keeping the last full cycle's reservation.
  void ScheduleLocked(const std::vector<std::string>* only) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExpireLeasesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status PlaceJob(JobEntry& entry, const scheduler::Placement& placement)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stops every claim of the job's current generation with `reason`.
  void ReleaseClaims(JobEntry& entry, const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A rank failed or a node was lost: restart the gang if restarts remain, else FAILED. `job` is
  // the entry's next state so far (a copy, perhaps with an exit recorded). Claims are released
  // once the change is stored; on a store error nothing changes.
  absl::Status FailOrRestart(JobEntry& entry, pb::Job job, const std::string& reason, const std::string& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status OnNodeExited(JobEntry& entry, const std::string& node, int exit_code, const std::string& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyProcessReports(NodeEntry& node,
                           const google::protobuf::RepeatedPtrField<pb::ProcessStatus>& reports,
                           bool registering) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What the scheduler sees of the nodes (in name order), each with its ContentGeneration.
  std::vector<scheduler::NodeView> NodeViews(bool all_free) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  scheduler::NodeView NodeViewOf(const std::string& name, const NodeEntry& node, bool all_free) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Rebuilds the view of node `name` in `views` (NodeViews(false) order) after its claims changed.
  void RefreshView(std::vector<scheduler::NodeView>& views, const std::string& name,
                   const std::map<std::string, std::set<std::string>>& reserved) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The nodes (and their qualifying devices) a waiting job is held for: those closest to
  // holding it, i.e. with the most free qualifying devices. Empty if the pool lacks such nodes.
  std::map<std::string, std::set<std::string>> ReservationFor(const scheduler::PlacementRequest& request,
                                                              const std::vector<scheduler::NodeView>& views) const;
  // What every user and group holds now (all claims, including those being stopped).
  QuotaLedger LedgerLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Quotas at submission: the queue limit, a job the quota alone rules out, and (on_exceed
  // "reject") a job over quota now.
  absl::Status CheckQuotaLocked(const pb::JobSpec& spec) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // A port on `address` that no live or dying generation holds, taken round-robin so that a port
  // just let go of is the last to be handed out again.
  absl::StatusOr<int> PickRendezvousPort(const std::string& address) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  pb::Orders OrdersFor(const NodeEntry& node) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const ClusterOptions options_;
  Store* const store_;
  scheduler::PlacementPolicy* const policy_;

  mutable absl::Mutex mu_;
  mutable absl::CondVar changed_;  // signalled on every change (watchers, order streams, loop)
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool work_pending_ ABSL_GUARDED_BY(mu_) = false;  // something may now be schedulable
  bool store_healthy_ ABSL_GUARDED_BY(mu_) = true;  // the last job write was stored
  std::map<std::string, int> next_port_ ABSL_GUARDED_BY(mu_);  // per address: offset into the port range
  std::vector<std::string> new_jobs_ ABSL_GUARDED_BY(mu_);  // submitted since the last cycle
  absl::Time last_full_cycle_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::map<std::string, std::set<std::string>> reserved_ ABSL_GUARDED_BY(mu_);  // the head's hold
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<std::string, JobEntry> jobs_ ABSL_GUARDED_BY(mu_);
  // Idempotency keys are the submitting user's own: (user, request_id) -> job id.
  using RequestKey = std::pair<std::string, std::string>;
  std::map<RequestKey, std::string> job_by_request_ ABSL_GUARDED_BY(mu_);
  std::set<RequestKey> requests_in_flight_ ABSL_GUARDED_BY(mu_);  // submissions being written
  std::map<std::string, NodeEntry> nodes_ ABSL_GUARDED_BY(mu_);

  std::thread loop_;  // last member: joined before the state it uses goes away
};

}  // namespace hetpool::daemon
