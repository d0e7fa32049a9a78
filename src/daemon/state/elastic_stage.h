// ElasticStage: the scheduling cycle's stage for elastic jobs (JobSpec.elastic_nnodes). The
// cycle places an elastic job on as many nodes as fit, from max down to min (ElasticSizes,
// job_request.h); this stage resizes the ones that run:
// - it shrinks one toward its min for a job of at least its priority that waits for capacity,
//   before any preemption, when the policy confirms the waiting job then fits and the elastic
//   job still fits at a smaller size on what is left;
// - it grows one when nothing waits for capacity and the policy finds it room for more nodes,
//   at most once per --elastic-grow-after of its generation running (each resize restarts it
//   from its checkpoint, so growing without pause would run nothing).
// A resize stops the generation through the reconciler (Resize: preemption_grace, no restart
// spent) and holds the cards of the new placement for the job (and, when it shrinks, those of
// the waiting job for that one) on the preemption stage's holds, which the cycle offers first
// once the processes are gone. Thread-free: SchedulingCycle runs it under ClusterState's lock.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "scheduler/placement_policy.h"
#include "src/daemon/state/agent_reconciler.h"
#include "src/daemon/state/job_table.h"
#include "src/daemon/state/node_registry.h"
#include "src/daemon/state/preemption_stage.h"

namespace hetpool::daemon {

class ElasticStage {
 public:
  // `holds`: the preemption stage, whose holds keep a resized job's next cards for it.
  // `grow_after`: how long a generation runs before it may grow.
  ElasticStage(JobTable& jobs, NodeRegistry& nodes, AgentReconciler& reconciler, scheduler::PlacementPolicy& policy,
               PreemptionStage& holds, absl::Duration grow_after);

  // A new pass: the running elastic jobs are gathered again when first needed.
  void NewPass() { running_.reset(); }
  // Something still waits for capacity: nothing grows until the pool changes (every change
  // brings a full pass, and TryGrow with it).
  void Postpone() { next_grow_check_ = absl::InfiniteFuture(); }

  using ViewsWithout = PreemptionStage::ViewsWithout;
  // `waiting` waits for capacity (`request` found no room): shrinks the one elastic
  // job (of at most its priority) whose smaller size makes room for it. False when none would.
  bool TryShrink(JobEntry& waiting, const scheduler::PlacementRequest& request, const ViewsWithout& views_without,
                 absl::Time now);
  // A job's placement request as the pass makes it (with its owner's quota).
  using RequestFor = std::function<scheduler::PlacementRequest(const JobEntry&)>;
  // Nothing waits for capacity: grows the first running elastic job below its max (higher
  // priority first, then the oldest) that has run --elastic-grow-after and for which the
  // policy finds more nodes (within its owner's quota, its present cards still counted). False
  // when none grows.
  bool TryGrow(const RequestFor& request_for, const ViewsWithout& views_without, absl::Time now);
  // When a running elastic job below its max next becomes due to grow (InfiniteFuture: none),
  // as of the last TryGrow: the cycle runs a full pass then.
  absl::Time next_grow_check() const { return next_grow_check_; }

 private:
  struct Running {
    JobEntry* entry = nullptr;
    int nodes = 0;
    double cards = 0;                                    // held in all (fractions by their fraction)
    std::vector<std::pair<std::string, JobGen>> claims;  // node, generation
  };
  // The elastic jobs running now, each with its claims; none being stopped or waiting on a hold.
  // Gathered once per pass; a job resized in it leaves.
  std::map<std::string, Running>& RunningElastic();
  // Whether `r` still runs as gathered (the preemption stage may have stopped it since).
  static bool StillRunning(const Running& r);
  // The largest size in [low, high] (high first) at which `request` fits on `views`, with its
  // placement.
  std::optional<std::pair<int, scheduler::Placement>> LargestFit(scheduler::PlacementRequest request, int high, int low,
                                                                 const std::vector<scheduler::NodeView>& views) const;
  double LostCardHours(const Running& job, absl::Time now) const;

  JobTable& jobs_;
  NodeRegistry& nodes_;
  AgentReconciler& reconciler_;
  scheduler::PlacementPolicy& policy_;
  PreemptionStage& holds_;
  const absl::Duration grow_after_;
  absl::Time next_grow_check_ = absl::InfiniteFuture();
  std::optional<std::map<std::string, Running>> running_;  // this pass's, once gathered
};

}  // namespace hetpool::daemon
