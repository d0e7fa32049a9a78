// Cards held for a job until the processes of the jobs stopped for it are gone: what a preemption
// does for its preemptor, a defragmentation for the job moves were made for, and an elastic resize
// for the resized job and the job it shrinks for. The cycle marks held cards taken for everyone
// else and offers them to their job first. Each hold is stored with its job (Job.hold) before it
// counts, and comes back after a restart. Thread-free: used under ClusterState's lock.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "scheduler/placement_policy.h"
#include "src/daemon/state/job_table.h"
#include "src/daemon/state/node_registry.h"

namespace hetpool::daemon {

// Cards per node: node -> device ids.
using HeldCards = std::map<std::string, std::set<std::string>>;

class CardHolds {
 public:
  CardHolds(JobTable& jobs, NodeRegistry& nodes) : jobs_(jobs), nodes_(nodes) {}

  // Holds the cards of `placement` for `job_id` until `claims` (node, generation) are gone.
  // `moved_for_at`, when jobs were moved for it (Job.moved_for_at), is stored with the hold.
  void HoldFor(const std::string& job_id, const scheduler::Placement& placement,
               std::vector<std::pair<std::string, JobGen>> claims,
               std::optional<absl::Time> moved_for_at = std::nullopt);
  // The job was placed, ended, or must look again: its hold goes (and its stored copy with the
  // job's next write).
  void Release(const std::string& job_id);
  // After a restart: the stored holds of PENDING jobs count again. Until `now + patience` a hold
  // also waits for its victims' nodes to register again (their agents report the stopping
  // processes, whose claims only come back then); past it a node that has not is taken as gone.
  void RestoreHolds(absl::Time now, absl::Duration patience);

  // The jobs holding cards, in the order their holds began.
  std::vector<std::string> Preemptors() const;
  bool Waiting(const std::string& job_id) const { return holds_.contains(job_id); }
  // Whether every claim the job waits on is gone (its held cards are free for it now).
  bool VictimsGone(const std::string& job_id) const;
  // Every held card, or those held for everyone but `except` (a job id).
  HeldCards HeldForPreemptors(const std::string& except = "") const;

 private:
  struct Hold {
    uint64_t seq = 0;                                    // the order holds began in
    HeldCards cards;                                     // where the job goes
    std::vector<std::pair<std::string, JobGen>> claims;  // the stopped jobs' claims to wait for
    absl::Time nodes_until = absl::InfinitePast();       // restored: wait for nodes to register
  };
  static pb::CardHold ToProto(const Hold& hold);
  static Hold FromProto(const pb::CardHold& stored);

  JobTable& jobs_;
  NodeRegistry& nodes_;
  std::map<std::string, Hold> holds_;  // job id -> its hold
  uint64_t next_seq_ = 0;
};

}  // namespace hetpool::daemon
