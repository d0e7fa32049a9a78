// FairShareLedger: the key of the fair-share queue order. For each group it knows what it holds
// now and what it used before (an average that halves its memory every usage_half_life, like
// Slurm's decayed usage), and what it is entitled to (queue_config.h). A group's share is its
// dominant one, as in dominant-resource fairness: the largest, over the card classes it is
// entitled to, of max(held now, decayed average) / entitlement. Pending jobs of the group with
// the lowest share are offered cards first (the FairShare QueueSort plugin), so a group below
// its entitlement gets freed cards before one that borrows. Within a group its users are shared
// the same way (Slurm's fair tree): each user is entitled to its weight's part of the pool
// (queue_config.h, "users"), with its own decayed usage, and among one group's jobs those of the
// user with the lowest share go first. Thread-free; the scheduling cycle feeds it the pool's
// holdings every pass and the placements it makes within one.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "src/daemon/security/quota.h"
#include "src/daemon/sharing/queue_config.h"

namespace hetpool::daemon {

// One group as `hetpoolctl queues` shows it. Cards, fractional shares by their fraction.
struct GroupShare {
  std::string group;
  double weight = 1;
  std::map<std::string, double> nominal;  // selector -> cards, as configured
  double entitled = 0;                    // cards: nominal "*", the sum of the nominal selectors, or the weight's part
  double used = 0;                        // held now
  double borrowed = 0;                    // held above the entitlement (idle cards of others)
  double decayed = 0;                     // the decayed average of cards held
  double share = 0;                       // the queue order's key
  // The group's users, each entitled to its weight's part of the group's cards (nominal and
  // borrowed stay empty there); share is the user's among the group's users.
  std::vector<GroupShare> users;
};

using UserHoldings = std::map<std::string, CardHoldings>;  // user -> cards

class FairShareLedger {
 public:
  explicit FairShareLedger(QueueConfig config) : FairShareLedger(std::move(config), /*within_groups=*/true) {}
  FairShareLedger(FairShareLedger&&) = default;
  FairShareLedger& operator=(FairShareLedger&&) = default;
  ~FairShareLedger();

  // A changed --queues file: new weights and nominal cards; the usage so far is kept.
  void Reconfigure(QueueConfig config);
  const QueueConfig& config() const { return config_; }

  // The pool's cards per class and what each group's users hold now. Ages the decayed usage to
  // `now` under what was held since the last call.
  void Observe(absl::Time now, CardHoldings capacity, std::map<std::string, UserHoldings> held);
  // Cards held before this ledger existed (a daemon restart): `milli` of a class over
  // [start, end], decayed to the time of the last Observe.
  void AddPastUsage(const std::string& group, const std::string& user, const CardClass& card_class, int64_t milli,
                    absl::Time start, absl::Time end);
  // A placement made since the last Observe: it counts at once in the group's and user's shares.
  void Hold(const std::string& group, const std::string& user, const CardClass& card_class, int64_t milli);

  // The group's dominant share (0 when it is entitled to nothing and uses nothing).
  double Share(const std::string& group) const;
  // The user's dominant share among the group's users: what it uses over its weight's part of
  // the group's cards (GroupCards), the order of the group's own jobs.
  double UserShare(const std::string& group, const std::string& user) const;
  // ClassShare and HeldShare of a user among its group's users: what preemption within a group
  // reads (0 for a group none of whose users hold, held or wait).
  double UserClassShare(const std::string& group, const std::string& user, const CardClass& card_class) const;
  double UserHeldShare(const std::string& group, const std::string& user, const CardHoldings& plus = {}) const;
  // What the group holds now of one class of cards, `plus_milli` added, over what it is entitled
  // to of it (past usage left out; the largest ratio over its selectors that cover the class).
  // Above 1 it borrows others' idle entitlement there, which a group below its own may reclaim
  // by preemption (preemption_stage.h). Entitled to none of the class: 0 if it holds none, else
  // above any entitlement.
  double ClassShare(const std::string& group, const CardClass& card_class, int64_t plus_milli = 0) const;
  // The dominant one of them: the largest over the classes it holds or is entitled to, `plus`
  // added.
  double HeldShare(const std::string& group, const CardHoldings& plus = {}) const;
  // Every configured group and every group that holds or used cards, by name, each with its
  // users (configured, holding or remembered).
  std::vector<GroupShare> Groups() const;

 private:
  // A group's users are a ledger of their own whose groups are the users; that one does not
  // look further down.
  FairShareLedger(QueueConfig config, bool within_groups);
  QueueConfig UsersConfig(const std::string& group) const;
  FairShareLedger& UsersOf(const std::string& group);
  const FairShareLedger* FindUsers(const std::string& group) const;  // null: none of its users known
  // What `group` is entitled to, milli-cards per selector: its nominal cards, or its weight's part
  // of each class (by fingerprint) after the nominal cards of others.
  std::vector<std::pair<std::string, double>> Entitlements(const std::string& group) const;  // selector, milli
  // Milli-cards of the pool's classes that `selector` covers: what a selector's cards are spread
  // over, in proportion to each class's size.
  int64_t CoveredMilli(const std::string& selector) const;
  // What a group's users share, class by class: its entitlement, or what it holds where it
  // borrows more. A user's share is of these cards: its part by weight of what its group has.
  CardHoldings GroupCards(const std::string& group) const;
  std::set<std::string> KnownGroups() const;  // configured, holding or remembered
  double HeldMatching(const std::string& group, const std::string& selector) const;  // milli, now
  double Usage(const std::string& group, const std::string& selector) const;         // milli, held or decayed
  double DominantShare(const std::string& group, const std::vector<std::pair<std::string, double>>& entitlements) const;

  QueueConfig config_;
  absl::Time observed_at_ = absl::InfinitePast();
  CardHoldings capacity_;
  std::map<std::string, CardHoldings> held_;                    // group -> now
  std::map<std::string, std::map<CardClass, double>> decayed_;  // group -> average milli
  bool within_groups_;
  std::map<std::string, std::unique_ptr<FairShareLedger>> users_;  // group -> its users' ledger
};

}  // namespace hetpool::daemon
