// PreemptionStage: the scheduling cycle's stage for a job that waits for capacity (hetpoold
// --preemption). It finds the running jobs that may be stopped for it (lower priority; with
// fair-share queues also equal or lower priority of a group above its share when the waiting
// job's group stays within its own), lets sharing/preemption.h choose the victims that lose the
// least work while the policy itself confirms the job then fits, stops them through the
// reconciler (requeued, restarts not spent, their preemption_grace between SIGTERM and
// SIGKILL), and holds the cards the job will get until the victims' processes are gone: the
// cycle marks them held for everyone else and offers them to the job first.
//
// Defragmentation (defrag_stage.h) chooses its victims through the same stage; the cards both
// hold for their job are card_holds.h's. Thread-free: SchedulingCycle runs it under
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
#include "src/daemon/sharing/fair_share.h"
#include "src/daemon/sharing/preemption.h"
#include "src/daemon/state/agent_reconciler.h"
#include "src/daemon/state/card_holds.h"
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

// The victims' shape for sharing/preemption.h, from the waiting job's request.
VictimRequest VictimRequestOf(const scheduler::PlacementRequest& request);

class PreemptionStage {
 public:
  // `fair_share`: the fair-share ledger (kFairShare reclaims by it; null: priority only).
  // `policy` confirms that a job fits once its victims are gone (Place, nothing bound).
  // `defrag_window`: --defrag-window; a job jobs were moved for within it is not reclaimed.
  PreemptionStage(JobTable& jobs, NodeRegistry& nodes, AgentReconciler& reconciler, scheduler::PlacementPolicy& policy,
                  PreemptionMode mode, const FairShareLedger* fair_share,
                  absl::Duration defrag_window = absl::Hours(1));

  bool enabled() const { return mode_ != PreemptionMode::kOff; }
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
  // The cards held for preemptors (and for the jobs defragmentation and resizes stop jobs for).
  CardHolds& holds() { return holds_; }
  const CardHolds& holds() const { return holds_; }
  std::vector<std::string> Preemptors() const { return holds_.Preemptors(); }
  bool Waiting(const std::string& job_id) const { return holds_.Waiting(job_id); }
  bool VictimsGone(const std::string& job_id) const { return holds_.VictimsGone(job_id); }
  void Release(const std::string& job_id) { holds_.Release(job_id); }
  // The job was stopped by another stage (an elastic resize): not a victim in this pass.
  void Forget(const std::string& job_id) {
    if (candidates_) candidates_->erase(job_id);
  }
  HeldCards HeldForPreemptors(const std::string& except = "") const { return holds_.HeldForPreemptors(except); }
  void HoldFor(const std::string& job_id, const scheduler::Placement& placement,
               std::vector<std::pair<std::string, JobGen>> claims) {
    holds_.HoldFor(job_id, placement, std::move(claims));
  }
  void RestoreHolds(absl::Time now, absl::Duration patience) { holds_.RestoreHolds(now, patience); }

  // For defragmentation (defrag_stage.h), which chooses among the same running jobs: each one
  // that declares itself movable, of at most `priority`, not moved since `not_moved_since`, by id.
  std::map<std::string, const PreemptibleJob*> Movable(int priority, absl::Time not_moved_since, absl::Time now);
  const pb::JobSpec& SpecOf(const std::string& running_job_id) const {
    return candidates_->at(running_job_id).entry->job().spec();
  }
  std::vector<NodeOffer> Offers(const scheduler::PlacementRequest& request,
                                const std::vector<scheduler::NodeView>& views,
                                const std::map<std::string, const PreemptibleJob*>& stoppable) const;
  // The claims (node, generation) of these running jobs.
  std::vector<std::pair<std::string, JobGen>> ClaimsOf(const std::set<std::string>& victims) const;
  // Stops the chosen victims for `entry` (moves them, with `defragmentation`) and holds the cards
  // of its placement. False when the store took none of them.
  bool StopVictims(JobEntry& entry, const PreemptionChoice& choice, const std::map<std::string, std::string>& why,
                   bool defragmentation, absl::Time now);

 private:
  struct Candidate {
    PreemptibleJob job;
    JobEntry* entry = nullptr;
    int priority = 0;
    std::string group;
    std::string user;
    std::vector<std::pair<std::string, JobGen>> claims;  // node, generation: all desired
    std::set<CardClass> classes;                         // of the cards it holds
    bool bought_by_moves = false;                        // jobs were moved for it within --defrag-window: not reclaimed
  };
  // Groups' class shares (FairShareLedger::ClassShare), asked once per attempt.
  using ShareMemo = std::map<std::pair<std::string, CardClass>, double>;
  void GatherCandidates(absl::Time now);
  // Why `c` may be stopped for `entry`, or nullopt.
  std::optional<std::string> MayStop(const JobEntry& entry, const Candidate& c, ShareMemo& shares) const;
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
  const absl::Duration defrag_window_;
  std::optional<std::map<std::string, Candidate>> candidates_;  // running jobs by id, this pass
  CardHolds holds_;
};

}  // namespace hetpool::daemon
