// The order a scheduling pass offers pending jobs in: the policy's QueueSort over every job, with
// each job's group share (fair_share.h) read again after every placement, since placing a
// group's job raises its share. Jobs are kept per group and, within it, per user in the policy's
// order (one user's jobs share a share); a group's next job is the best of its users' heads by
// their shares within the group, and the next job is the best of the groups' next jobs by the
// groups' shares: O(groups + the last group's users) a step. Without a fair-share ledger every
// share is 0 and this is the policy's plain order.
#pragma once

#include <string>
#include <vector>

#include "scheduler/placement_policy.h"
#include "src/daemon/sharing/fair_share.h"
#include "src/daemon/state/job_table.h"

namespace hetpool::daemon {

class QueueOrder {
 public:
  QueueOrder(const std::vector<JobEntry*>& pending, const scheduler::PlacementPolicy& policy,
             const FairShareLedger* ledger);

  // The next job to offer; nullptr when every job was offered.
  JobEntry* Next();
  // The ledger changed (a placement of the group's job): read the groups' shares and that
  // group's users' shares again.
  void SharesChanged(const std::string& group);

 private:
  struct Queue {  // one user's pending jobs in one group
    std::string name;
    std::vector<JobEntry*> jobs;  // in the policy's order
    size_t next = 0;
    double share = 0;
  };
  struct Group {
    std::string name;
    std::vector<Queue> users;
    double share = 0;
    Queue* head = nullptr;  // BestUser, kept until the group's queues or users' shares change
    bool head_stale = true;
  };
  static scheduler::QueuedJob Queued(const JobEntry& entry, double share);
  // The group's user whose head goes first, nullptr when all its jobs were offered.
  Queue* BestUser(Group& group) const;
  void ReadUserShares(Group& group);

  const scheduler::PlacementPolicy& policy_;
  const FairShareLedger* const ledger_;
  std::vector<Group> groups_;
};

}  // namespace hetpool::daemon
