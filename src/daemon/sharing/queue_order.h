// The order a scheduling pass offers pending jobs in: the policy's QueueSort over every job, with
// each job's group share (fair_share.h) read again after every placement, since placing a
// group's job raises its share. Jobs are kept per group in the policy's order (one group's jobs
// share a share), and the next job is the best of the groups' heads: O(groups) a step. Without
// a fair-share ledger every share is 0 and this is the policy's plain order.
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
  // The ledger changed (a placement): read the groups' shares again.
  void SharesChanged();

 private:
  struct Group {
    std::string name;
    std::vector<JobEntry*> jobs;  // in the policy's order
    size_t next = 0;
    double share = 0;
  };
  static scheduler::QueuedJob Queued(const JobEntry& entry, double share);

  const scheduler::PlacementPolicy& policy_;
  const FairShareLedger* const ledger_;
  std::vector<Group> groups_;
};

}  // namespace hetpool::daemon
