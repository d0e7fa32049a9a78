// What ClusterState tells whoever watches it (the metrics module) as things happen: scheduling
// decisions, store writes, jobs that end or restart. No Prometheus here: the state does not know
// how it is exported.
#pragma once

#include <string>

#include "absl/time/time.h"
#include "hetpool/v1/job.pb.h"

namespace hetpool::daemon {

// Why a gang goes back to the queue: the `reason` of JobRestarted, and of the job's event.
inline constexpr char kRestartNonZeroExit[] = "NonZeroExit";    // a rank exited with an error
inline constexpr char kRestartProcessLost[] = "ProcessLost";    // the agent no longer runs a rank
inline constexpr char kRestartNodeLost[] = "NodeLost";          // a node's lease ran out
inline constexpr char kRestartLaunchFailed[] = "LaunchFailed";  // a node could not start torchrun
// Stopped to make room for another job (hetpoold --preemption); restarts are not spent.
inline constexpr char kRestartPreempted[] = "Preempted";
// Moved to consolidate cards for a waiting gang (hetpoold --defrag-after; JobSpec.movable).
inline constexpr char kRestartMoved[] = "Moved";
// An elastic job resized: grown into free cards or shrunk for a waiting job (JobSpec.elastic_nnodes).
inline constexpr char kRestartResized[] = "Resized";
inline constexpr const char* kRestartReasons[] = {kRestartNonZeroExit,  kRestartProcessLost, kRestartNodeLost,
                                                  kRestartLaunchFailed, kRestartPreempted,   kRestartMoved,
                                                  kRestartResized};

class StateObserver {
 public:
  virtual ~StateObserver() = default;
  // One job offered to the scheduler (as it is after the decision): how long the decision took
  // and whether it was placed.
  virtual void Decision(const hetpool::v1::Job& job, absl::Duration took, bool placed) = 0;
  virtual void StoreWrite(absl::Duration took, bool ok) = 0;
  // One scheduling pass over the queue (`full`), or over new submissions only: how long it took.
  virtual void SchedulingPass(absl::Duration took, bool full) = 0;
  // The job reached SUCCEEDED, FAILED or CANCELLED.
  virtual void JobEnded(const hetpool::v1::Job& job) = 0;
  // A gang was stopped and goes back to the queue (`reason`: one of kRestartReasons); `job` as
  // it is now (PENDING; a preempted one names its preemptor in last_preemption).
  virtual void JobRestarted(const hetpool::v1::Job& job, const std::string& reason) = 0;
};

}  // namespace hetpool::daemon
