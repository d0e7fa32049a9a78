#include "src/daemon/sharing/queue_order.h"

#include <algorithm>
#include <map>

namespace hetpool::daemon {

QueueOrder::QueueOrder(const std::vector<JobEntry*>& pending, const scheduler::PlacementPolicy& policy,
                       const FairShareLedger* ledger)
    : policy_(policy), ledger_(ledger) {
  std::map<std::string, size_t> index;
  for (JobEntry* entry : pending) {
    const std::string name = ledger_ != nullptr ? entry->job.spec().group() : std::string();
    auto [it, added] = index.try_emplace(name, groups_.size());
    if (added) groups_.push_back(Group{name, {}, 0, 0});
    groups_[it->second].jobs.push_back(entry);
  }
  for (Group& group : groups_) {
    std::sort(group.jobs.begin(), group.jobs.end(), [this](const JobEntry* a, const JobEntry* b) {
      return policy_.QueueLess(Queued(*a, 0), Queued(*b, 0));
    });
  }
  SharesChanged();
}

scheduler::QueuedJob QueueOrder::Queued(const JobEntry& entry, double share) {
  return scheduler::QueuedJob{entry.job.spec().priority(), entry.job.submit_seq(), share};
}

void QueueOrder::SharesChanged() {
  if (ledger_ == nullptr) return;
  for (Group& group : groups_) group.share = ledger_->Share(group.name);
}

JobEntry* QueueOrder::Next() {
  Group* best = nullptr;
  for (Group& group : groups_) {
    if (group.next >= group.jobs.size()) continue;
    if (best == nullptr ||
        policy_.QueueLess(Queued(*group.jobs[group.next], group.share), Queued(*best->jobs[best->next], best->share))) {
      best = &group;
    }
  }
  return best == nullptr ? nullptr : best->jobs[best->next++];
}

}  // namespace hetpool::daemon
