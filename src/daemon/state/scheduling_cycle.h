// SchedulingCycle: one pass of the queue through the placement policy. It brings the node views
// the policy decides on up to date (node_view_cache.h), offers the pending jobs in
// the policy's queue order, binds each placement (launch/placement_binder.h), keeps the head of
// the queue's reservation (the Reservation filter keeps backfill off it), asks the quota ledger
// for the Quota filter, keeps the fair-share ledger's view of what groups hold (its queue order,
// sharing/queue_order.h), and records why each job still waits. A job that waits for capacity may
// shrink an elastic job (elastic_stage.h) or preempt (preemption_stage.h); a full pass that
// leaves nothing waiting for capacity may grow an elastic job. Thread-free: ClusterState runs it
// under its lock.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/time/time.h"
#include "planner/pool.h"
#include "scheduler/framework/pending_reason.h"
#include "scheduler/placement_policy.h"
#include "src/daemon/security/quota.h"
#include "src/daemon/sharing/fair_share.h"
#include "src/daemon/state/agent_reconciler.h"
#include "src/daemon/state/elastic_stage.h"
#include "src/daemon/state/job_table.h"
#include "src/daemon/state/node_registry.h"
#include "src/daemon/state/node_view_cache.h"
#include "src/daemon/state/defrag_stage.h"
#include "src/daemon/state/preemption_stage.h"
#include "src/daemon/state/state_observer.h"
#include "src/daemon/state/wakeups.h"

namespace hetpool::daemon {

struct CycleOptions {
  bool metax_cuda_translation = false;       // a CUDA translation layer is installed on MetaX nodes
  std::shared_ptr<const QuotaTable> quotas;  // null: no quotas
  StateObserver* observer = nullptr;         // decision times
  // Fair-share queues (--queues): the ledger the queue order reads; null: the policy's order alone.
  FairShareLedger* fair_share = nullptr;
  // hetpoold --preemption: whether a job that waits for capacity may stop others (the
  // preemption stage, preemption_stage.h); kFairShare needs `fair_share`.
  PreemptionMode preemption = PreemptionMode::kOff;
  // hetpoold --defrag-after and its limits: moves of movable jobs for a gang that waits on
  // scattered cards (the same stage).
  DefragOptions defrag;
  // hetpoold --elastic-grow-after: how long an elastic job's generation runs before it may grow
  // into free cards (elastic_stage.h).
  absl::Duration elastic_grow_after = absl::Minutes(5);
  // A full pass over the queue runs at least this often, a safety net for a missed wake-up.
  absl::Duration full_pass_every = absl::Minutes(1);
  // What a job across vendors' batch split reads (each class's MFU); null: the vendor defaults.
  const planner::PriceTable* prices = nullptr;
};

class SchedulingCycle {
 public:
  // `reconciler` stops the jobs the preemption stage preempts.
  SchedulingCycle(JobTable& jobs, NodeRegistry& nodes, scheduler::PlacementPolicy* policy, AgentReconciler& reconciler,
                  Wakeups& wakeups, CycleOptions options);

  // A job entered the queue: the next Run offers it even when nothing freed capacity.
  void Submitted(const std::string& job_id) { new_jobs_.push_back(job_id); }
  // After a restart (the stored jobs loaded): the holds of jobs waiting for those they stopped.
  void RestoreHolds(absl::Time now, absl::Duration patience) { preemption_.RestoreHolds(now, patience); }
  bool HasNewJobs() const { return !new_jobs_.empty(); }
  // One tick: when nothing freed capacity since the last full pass (Wakeups::CapacityChanged),
  // the jobs already waiting still wait, so only new submissions are offered, behind the last
  // full pass's reservation; otherwise, or once `full_pass_every`, or when an elastic job
  // becomes due to grow, the whole queue.
  void Run(absl::Time now);

  // OK if the pool could ever hold `request` (every node free and taking work), else the
  // policy's FAILED_PRECONDITION saying why. Every submission asks; over thousands of nodes the
  // policy's answer took milliseconds under the state lock, so it is remembered per request shape
  // until the pool's lasting inventory changes (NodeRegistry::lasting_epoch).
  absl::Status EverFits(const scheduler::PlacementRequest& request);

  // What the policy sees of the nodes, in name order, each with its ContentGeneration.
  // `all_free`: as if no claim held anything and every node took work (can it ever fit?).
  std::vector<scheduler::NodeView> NodeViews(bool all_free) const;

 private:
  using Reservation = HeldCards;  // node -> device ids

  // What one pass places with: the views, the cards held (for the head of the queue and for
  // preemptors) and the ledgers its placements count in.
  struct PassState;

  void Pass(const std::vector<std::string>* only, absl::Time now);
  // Rebuilds the view of `name` in `views` after its claims changed.
  void Refresh(std::vector<scheduler::NodeView>& views, const std::string& name, const Reservation& held) const;
  // Offers the job to the policy and binds it; on a placement, counts it in the ledgers and
  // refreshes the views it changed.
  absl::StatusOr<scheduler::Placement> Offer(JobEntry& entry, const scheduler::PlacementRequest& request,
                                             PassState& pass);
  // Jobs whose victims have stopped are offered first, onto the cards held for them.
  void OfferPreemptors(PassState& pass);
  // Why a job still waits (`waited`: decoded from `status`), recorded (and shown to watchers)
  // when it changed.
  // The pool as it would be without some jobs' claims (cards held as in `pass`): what preemption,
  // defragmentation and elastic resizes ask the policy about.
  PreemptionStage::ViewsWithout ViewsWithoutClaims(PassState& pass) const;
  // Defragmentation after the queue (defrag_stage.h): for `scattered`, the jobs that waited past
  // --defrag-after; `head` holds the pass's reservation.
  void MoveForScattered(PassState& pass, std::vector<JobEntry*> scattered, const JobEntry* head,
                        const PreemptionStage::ViewsWithout& views_without, absl::Time now);
  void NoteWaiting(JobEntry& entry, const scheduler::PlacementRequest& request, absl::Status status,
                   const scheduler::PendingReason& waited, std::vector<scheduler::NodeView>& views,
                   Reservation& reserved);
  // The last pass's views, kept for the next one to bring up to date (NodeViewCache::Sync).
  std::vector<scheduler::NodeView> working_views_;
  // EverFits' answers by request shape (RefusalMemo::RequestKey), for the pool's lasting epoch.
  std::unordered_map<std::string, absl::Status> ever_fits_;
  uint64_t ever_fits_epoch_ = 0;

  JobTable& jobs_;
  NodeRegistry& nodes_;
  scheduler::PlacementPolicy* const policy_;
  Wakeups& wakeups_;
  const CycleOptions options_;
  NodeViewCache views_;
  PreemptionStage preemption_;
  DefragStage defrag_;                 // chooses and stops through preemption_
  ElasticStage elastic_;               // keeps its resized jobs' cards on preemption_'s holds
  std::vector<std::string> new_jobs_;  // submitted since the last pass
  absl::Time last_full_pass_ = absl::InfinitePast();
  Reservation reserved_;  // the head of the queue's hold, from the last full pass
};

}  // namespace hetpool::daemon
