// Defragmentation (hetpoold --defrag-after): for a job that has waited that long although the
// pool has enough free qualifying cards, scattered, it moves jobs that declare themselves
// `movable` (of at most its priority) when the policy confirms that the job then fits and that
// every moved job fits elsewhere at once, or, once the job has waited --defrag-requeue-after, that
// jobs smaller than it may wait in the queue. Moves are paced (move_pacing.h): the set losing the
// least work that the moves allowed now can pay for, and no job twice within --defrag-window;
// within that window the job moves were made for is not reclaimed by fair share either. The
// victims are chosen and stopped through the preemption stage, whose card holds keep the freed
// cards for the job. The cycle runs it after the queue, for the largest waiting jobs first.
// Thread-free: SchedulingCycle runs it under ClusterState's lock.
#pragma once

#include "absl/time/time.h"
#include "scheduler/placement_policy.h"
#include "src/daemon/state/move_pacing.h"
#include "src/daemon/state/preemption_stage.h"

namespace hetpool::daemon {

struct DefragOptions {
  absl::Duration after = absl::ZeroDuration();  // how long a job waits before moves; zero: never
  int moves_per_hour = 12;
  absl::Duration window = absl::Hours(1);  // a job is moved at most once within this long
  // How long a job waits before the jobs moved for it may wait for their own place in the queue
  // (not placed elsewhere at once); zero: never.
  absl::Duration requeue_after = absl::ZeroDuration();
  // At most this many moves at once (move_pacing.h); zero or moves_per_hour and above: the hour's
  // moves may all go at once.
  int move_burst = 0;
};

class DefragStage {
 public:
  DefragStage(PreemptionStage& victims, scheduler::PlacementPolicy& policy, DefragOptions options)
      : victims_(victims), policy_(policy), options_(options), pacing_(options.moves_per_hour, options.move_burst) {}

  // Whether `entry` has waited past --defrag-after for room (TryMove may move jobs for it).
  bool MayMoveFor(const JobEntry& entry, absl::Time now) const;
  enum class MoveOutcome {
    kMoved,
    kNone,        // no such move, or none may go now
    kOverBudget,  // a move exists but needs more moves than the hour has left
  };
  MoveOutcome TryMove(JobEntry& entry, const scheduler::PlacementRequest& request,
                      const std::vector<scheduler::NodeView>& views, const PreemptionStage::ViewsWithout& views_without,
                      absl::Time now);

 private:
  // The cheapest set of `movable` jobs (at most `max_moves`) whose moves let the job fit; with
  // `land`, each moved job must fit elsewhere at once.
  std::optional<PreemptionChoice> Choose(const scheduler::PlacementRequest& request,
                                         const PreemptionStage::ViewsWithout& views_without,
                                         const std::vector<NodeOffer>& offers, bool land, int max_moves);

  PreemptionStage& victims_;
  scheduler::PlacementPolicy& policy_;
  const DefragOptions options_;
  MovePacing pacing_;
};

}  // namespace hetpool::daemon
