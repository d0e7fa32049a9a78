// PreemptionStage: the scheduling cycle's stage for a job that waits for capacity (hetpoold
// --preemption). It finds the running jobs that may be stopped for it (lower priority; with
// fair-share queues also equal or lower priority of a group above its share when the waiting
// job's group stays within its own), lets sharing/preemption.h choose the victims that lose the
// least work while the policy itself confirms the job then fits, stops them through the
// reconciler (requeued, restarts not spent, their preemption_grace between SIGTERM and
// SIGKILL), and holds the cards the job will get until the victims' processes are gone: the
// cycle marks them held for everyone else and offers them to the job first.
//
// Defragmentation (hetpoold --defrag-after) is the same victim choice with other victims: for a
// job that has waited that long although the pool has enough free qualifying cards, scattered, it
// moves jobs that declare themselves `movable` (of at most its priority) when the policy confirms
// that the job then fits and that every moved job fits elsewhere at once, or, once the job has
// waited --defrag-requeue-after, that jobs smaller than it may wait in the queue; at most
// --defrag-moves-per-hour moves (the set losing the least work that the moves left can pay for;
// --defrag-move-burst paces them), and no job twice within --defrag-window; within that window the
// job moves were made for is not reclaimed by fair share either. The cycle runs it after
// the queue, for the largest waiting jobs first. Thread-free: SchedulingCycle runs it under
// ClusterState's lock.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "scheduler/placement_policy.h"
#include "src/common/token_bucket.h"
#include "src/daemon/sharing/fair_share.h"
#include "src/daemon/sharing/preemption.h"
#include "src/daemon/state/agent_reconciler.h"
#include "src/daemon/state/job_table.h"
#include "src/daemon/state/node_registry.h"

namespace hetpool::daemon {

enum class PreemptionMode {
  kOff,
  kPriority,   // a waiting job may stop lower-priority jobs
  kFairShare,  // also reclaim: jobs of groups above their fair share, for a group below its own
};
// "off", "priority", "fair-share"; INVALID_ARGUMENT otherwise.
absl::StatusOr<PreemptionMode> ParsePreemptionMode(const std::string& text);

struct DefragOptions {
  absl::Duration after = absl::ZeroDuration();  // how long a job waits before moves; zero: never
  int moves_per_hour = 12;
  absl::Duration window = absl::Hours(1);  // a job is moved at most once within this long
  // How long a job waits before the jobs moved for it may wait for their own place in the queue
  // (not placed elsewhere at once); zero: never.
  absl::Duration requeue_after = absl::ZeroDuration();
  // Pacing: at most this many moves at once, the hour's others spread at moves_per_hour (a token
  // bucket of this size refilled at that rate); zero or moves_per_hour and above: the hour's
  // moves may all go at once.
  int move_burst = 0;
};

// Cards per node: node -> device ids.
using HeldCards = std::map<std::string, std::set<std::string>>;

class PreemptionStage {
 public:
  // `fair_share`: the fair-share ledger (kFairShare reclaims by it; null: priority only).
  // `policy` confirms that a job fits once its victims are gone (Place, nothing bound).
  PreemptionStage(JobTable& jobs, NodeRegistry& nodes, AgentReconciler& reconciler, scheduler::PlacementPolicy& policy,
                  PreemptionMode mode, const FairShareLedger* fair_share, DefragOptions defrag = {});

  bool enabled() const { return mode_ != PreemptionMode::kOff || defrag_.after > absl::ZeroDuration(); }
  // A new pass: the running jobs are gathered again on the first attempt.
  void NewPass() { candidates_.reset(); }

  // The pool without some claims (node, generation), as the cycle's views show it (cards held
  // for others marked).
  using ViewsWithout =
      std::function<std::vector<scheduler::NodeView>(const std::vector<std::pair<std::string, JobGen>>& claims)>;
  // `entry` waits for capacity (`request` found no room on `views`): stops the cheapest victims
  // that make it fit and holds their cards for it. False when none would, or none may be stopped.
  bool TryPreempt(JobEntry& entry, const scheduler::PlacementRequest& request,
                  const std::vector<scheduler::NodeView>& views, const ViewsWithout& views_without, absl::Time now);
  // Whether `entry` has waited past --defrag-after for room (TryMove may move jobs for it).
  bool MayMoveFor(const JobEntry& entry, absl::Time now) const;
  // `entry` has waited past --defrag-after with enough free qualifying cards in the pool, but
  // scattered: moves the movable jobs that lose the least work when the job then fits and each
  // of them fits elsewhere (or, past --defrag-requeue-after, waits in the queue).
  enum class MoveOutcome {
    kMoved,
    kNone,        // no such move, or the hour's moves are spent
    kOverBudget,  // a move exists but needs more moves than the hour has left
  };
  MoveOutcome TryMove(JobEntry& entry, const scheduler::PlacementRequest& request,
                      const std::vector<scheduler::NodeView>& views, const ViewsWithout& views_without, absl::Time now);

  // The jobs waiting for their victims to stop, in the order they preempted.
  std::vector<std::string> Preemptors() const;
  bool Waiting(const std::string& job_id) const { return holds_.contains(job_id); }
  // Whether every claim of the job's victims is gone (their cards are free for it now).
  bool VictimsGone(const std::string& job_id) const;
  // The job was placed, ended, or must look again: its hold goes (and its stored copy with the
  // job's next write).
  void Release(const std::string& job_id);
  // The job was stopped by another stage (an elastic resize): not a victim in this pass.
  void Forget(const std::string& job_id) {
    if (candidates_) candidates_->erase(job_id);
  }
  // Every card held for a preemptor, and those held for everyone but `except` (a job id).
  HeldCards HeldForPreemptors(const std::string& except = "") const;
  // Holds the cards of `placement` for `job_id` until `claims` (node, generation) are gone; the
  // cycle then offers it those cards first. What a preemption does for its preemptor, and an
  // elastic resize (elastic_stage.h) for the resized job and the job it shrinks for.
  // The hold is stored with the job (Job.hold) before it counts; `moved_for_at`, when jobs were
  // moved for it (Job.moved_for_at), with it.
  void HoldFor(const std::string& job_id, const scheduler::Placement& placement,
               std::vector<std::pair<std::string, JobGen>> claims,
               std::optional<absl::Time> moved_for_at = std::nullopt);
  // After a restart: the stored holds of PENDING jobs count again. Until `now + patience` a hold
  // also waits for its victims' nodes to register again (their agents report the stopping
  // processes, whose claims only come back then); past it a node that has not is taken as gone.
  void RestoreHolds(absl::Time now, absl::Duration patience);

 private:
  struct Candidate {
    PreemptibleJob job;
    JobEntry* entry = nullptr;
    int priority = 0;
    std::string group;
    std::string user;
    std::vector<std::pair<std::string, JobGen>> claims;  // node, generation: all desired
    std::set<CardClass> classes;                          // of the cards it holds
    bool bought_by_moves = false;  // jobs were moved for it within --defrag-window: not reclaimed
  };
  // Groups' class shares (FairShareLedger::ClassShare), asked once per attempt.
  using ShareMemo = std::map<std::pair<std::string, CardClass>, double>;
  struct Hold {
    uint64_t seq = 0;                                    // preemption order
    HeldCards cards;                                     // where the preemptor goes
    std::vector<std::pair<std::string, JobGen>> claims;  // the victims' claims to wait for
    absl::Time nodes_until = absl::InfinitePast();       // restored: wait for nodes to register
  };
  static pb::CardHold ToProto(const Hold& hold);
  static Hold FromProto(const pb::CardHold& stored);

  void GatherCandidates(absl::Time now);
  // The claims (node, generation) of these candidates.
  std::vector<std::pair<std::string, JobGen>> ClaimsOf(const std::set<std::string>& victims) const;
  // Why `c` may be stopped for `entry`, or nullopt.
  std::optional<std::string> MayStop(const JobEntry& entry, const Candidate& c, ShareMemo& shares) const;
  std::vector<NodeOffer> Offers(const scheduler::PlacementRequest& request,
                                const std::vector<scheduler::NodeView>& views,
                                const std::map<std::string, const PreemptibleJob*>& stoppable) const;
  // Stops the chosen victims for `entry` (moves them, with `defragmentation`) and holds the cards
  // of its placement. False when the store took none of them.
  bool StopVictims(JobEntry& entry, const PreemptionChoice& choice, const std::map<std::string, std::string>& why,
                   bool defragmentation, absl::Time now);
  // Reclaim keeps the preemptor's group within its dominant share once placed (`from_others`:
  // victims of other groups) and its user within its part of the group (`from_own`: victims of
  // its own group).
  bool StaysWithinShare(const JobEntry& entry, const scheduler::Placement& placement,
                        const std::vector<scheduler::NodeView>& views, bool from_others, bool from_own) const;
  // Reclaim within a group: the victim's user above its part of the group's cards, the waiting
  // job's user below its own.
  std::optional<std::string> MayStopWithinGroup(const pb::JobSpec& waiting, const Candidate& c) const;

  JobTable& jobs_;
  NodeRegistry& nodes_;
  AgentReconciler& reconciler_;
  scheduler::PlacementPolicy& policy_;
  const PreemptionMode mode_;
  const FairShareLedger* const fair_share_;
  const DefragOptions defrag_;
  std::deque<absl::Time> moves_;  // the last hour's moves
  TokenBucket move_pacing_;       // DefragOptions::move_burst, refilled at moves_per_hour
  std::optional<std::map<std::string, Candidate>> candidates_;  // running jobs by id, this pass
  std::map<std::string, Hold> holds_;                            // preemptor id -> its hold
  uint64_t next_seq_ = 0;
};

}  // namespace hetpool::daemon
