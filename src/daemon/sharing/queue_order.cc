#include "src/daemon/sharing/queue_order.h"

#include <algorithm>
#include <map>
#include <utility>

namespace hetpool::daemon {

QueueOrder::QueueOrder(const std::vector<JobEntry*>& pending, const scheduler::PlacementPolicy& policy,
                       const FairShareLedger* ledger)
    : policy_(policy), ledger_(ledger) {
  std::map<std::string, size_t> group_index;
  std::map<std::pair<std::string, std::string>, size_t> user_index;  // (group, user) -> its place in the group
  for (JobEntry* entry : pending) {
    const pb::JobSpec& spec = entry->job().spec();
    const std::string group = ledger_ != nullptr ? spec.group() : std::string();
    const std::string user = ledger_ != nullptr ? spec.user() : std::string();
    auto [g, new_group] = group_index.try_emplace(group, groups_.size());
    if (new_group) groups_.push_back(Group{group, {}, 0});
    std::vector<Queue>& users = groups_[g->second].users;
    auto [u, new_user] = user_index.try_emplace({group, user}, users.size());
    if (new_user) users.push_back(Queue{user, {}, 0, 0});
    users[u->second].jobs.push_back(entry);
  }
  for (Group& group : groups_) {
    for (Queue& user : group.users) {
      std::sort(user.jobs.begin(), user.jobs.end(), [this](const JobEntry* a, const JobEntry* b) {
        return policy_.QueueLess(Queued(*a, 0), Queued(*b, 0));
      });
    }
    ReadUserShares(group);
    if (ledger_ != nullptr) group.share = ledger_->Share(group.name);
  }
}

scheduler::QueuedJob QueueOrder::Queued(const JobEntry& entry, double share) {
  return scheduler::QueuedJob{entry.job().spec().priority(), entry.job().submit_seq(), share};
}

void QueueOrder::ReadUserShares(Group& group) {
  if (ledger_ == nullptr) return;
  for (Queue& user : group.users) user.share = ledger_->UserShare(group.name, user.name);
}

void QueueOrder::SharesChanged(const std::string& group) {
  if (ledger_ == nullptr) return;
  for (Group& g : groups_) {
    g.share = ledger_->Share(g.name);
    if (g.name == group) {
      ReadUserShares(g);
      g.head_stale = true;
    }
  }
}

QueueOrder::Queue* QueueOrder::BestUser(Group& group) const {
  Queue* best = nullptr;
  for (Queue& user : group.users) {
    if (user.next >= user.jobs.size()) continue;
    if (best == nullptr ||
        policy_.QueueLess(Queued(*user.jobs[user.next], user.share), Queued(*best->jobs[best->next], best->share))) {
      best = &user;
    }
  }
  return best;
}

JobEntry* QueueOrder::Next() {
  Group* best = nullptr;
  for (Group& group : groups_) {
    if (group.head_stale) {
      group.head = BestUser(group);
      group.head_stale = false;
    }
    if (group.head == nullptr) continue;
    if (best == nullptr || policy_.QueueLess(Queued(*group.head->jobs[group.head->next], group.share),
                                             Queued(*best->head->jobs[best->head->next], best->share))) {
      best = &group;
    }
  }
  if (best == nullptr) return nullptr;
  best->head_stale = true;
  return best->head->jobs[best->head->next++];
}

}  // namespace hetpool::daemon
