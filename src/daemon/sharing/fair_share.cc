#include "src/daemon/sharing/fair_share.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

namespace hetpool::daemon {
namespace {

// The share of a group that uses cards it is entitled to none of: after everyone else.
constexpr double kNoEntitlement = 1e9;
// Decayed usage below this (milli-cards) is forgotten.
constexpr double kNegligible = 1e-3;

// The dominant share: the largest used / entitled over the selectors a group is entitled by
// (0 when it uses nothing; using what it is entitled to none of puts it after everyone).
double LargestRatio(const std::vector<std::pair<std::string, double>>& entitlements,
                    const std::function<double(const std::string& selector)>& used_of) {
  double share = 0;
  for (const auto& [selector, entitled] : entitlements) {
    const double used = used_of(selector);
    if (used <= 0) continue;
    share = std::max(share, entitled > 0 ? used / entitled : kNoEntitlement);
  }
  return share;
}

double Halving(absl::Duration elapsed, absl::Duration half_life) {
  return std::exp2(-absl::FDivDuration(elapsed, half_life));
}

// What a group's users hold, summed: the group's holdings.
CardHoldings Summed(const UserHoldings& users) {
  CardHoldings out;
  for (const auto& [user, classes] : users) {
    for (const auto& [card_class, milli] : classes) out[card_class] += milli;
  }
  return out;
}

}  // namespace

FairShareLedger::FairShareLedger(QueueConfig config, bool within_groups)
    : config_(std::move(config)), within_groups_(within_groups) {}

FairShareLedger::~FairShareLedger() = default;

QueueConfig FairShareLedger::UsersConfig(const std::string& group) const {
  QueueConfig users;
  users.usage_half_life = config_.usage_half_life;
  users.default_weight = kUnlistedUserWeight;
  const GroupQueue queue = config_.For(group);
  for (const auto& [user, weight] : queue.user_weights) users.groups[user] = GroupQueue{weight, {}, {}};
  return users;
}

FairShareLedger& FairShareLedger::UsersOf(const std::string& group) {
  auto& ledger = users_[group];
  if (ledger == nullptr) {
    ledger.reset(new FairShareLedger(UsersConfig(group), /*within_groups=*/false));
    // Its clock starts where this one's is, so past usage added now decays alike.
    if (observed_at_ != absl::InfinitePast()) ledger->Observe(observed_at_, GroupCards(group), {});
  }
  return *ledger;
}

void FairShareLedger::Reconfigure(QueueConfig config) {
  config_ = std::move(config);
  for (auto& [group, users] : users_) users->Reconfigure(UsersConfig(group));
}

void FairShareLedger::Observe(absl::Time now, CardHoldings capacity, std::map<std::string, UserHoldings> by_user) {
  // A group or user given with nothing held (one that waits: HoldingsByGroup) counts among the
  // others: a colleague's part is not all of the group's cards while it waits.
  std::map<std::string, CardHoldings> held;
  for (const auto& [group, users] : by_user) held[group] = Summed(users);
  if (observed_at_ != absl::InfinitePast() && now > observed_at_) {
    // Exact for what was held constant since the last call: A <- A d + h (1 - d).
    const double keep = Halving(now - observed_at_, config_.usage_half_life);
    for (const auto& [group, classes] : held_) {
      for (const auto& [card_class, milli] : classes) decayed_[group].try_emplace(card_class, 0.0);
    }
    for (auto group = decayed_.begin(); group != decayed_.end();) {
      const auto was_held = held_.find(group->first);
      for (auto it = group->second.begin(); it != group->second.end();) {
        double h = 0;
        if (was_held != held_.end()) {
          auto c = was_held->second.find(it->first);
          if (c != was_held->second.end()) h = static_cast<double>(c->second);
        }
        it->second = it->second * keep + h * (1 - keep);
        it = it->second < kNegligible && h == 0 ? group->second.erase(it) : std::next(it);
      }
      group = group->second.empty() ? decayed_.erase(group) : std::next(group);
    }
  }
  if (now > observed_at_) observed_at_ = now;
  capacity_ = std::move(capacity);
  held_ = std::move(held);
  if (within_groups_) {
    // Every group with users now or remembered ones: those that hold nothing now decay too. Each
    // group's users share the group's cards as they are now (GroupCards).
    for (const auto& [group, users] : by_user) UsersOf(group);
    for (auto& [group, ledger] : users_) {
      std::map<std::string, UserHoldings> users;
      if (auto it = by_user.find(group); it != by_user.end()) {
        for (const auto& [user, classes] : it->second) users[user][""] = classes;
      }
      ledger->Observe(now, GroupCards(group), std::move(users));
    }
  }
}

int64_t FairShareLedger::CoveredMilli(const std::string& selector) const {
  int64_t covered = 0;
  for (const auto& [c, m] : capacity_) covered += SelectorMatches(selector, c.first, c.second) ? m : 0;
  return covered;
}

CardHoldings FairShareLedger::GroupCards(const std::string& group) const {
  CardHoldings cards;
  // A selector's entitlement spread over the classes it covers, in proportion to their size.
  for (const auto& [selector, milli] : Entitlements(group)) {
    const int64_t covered = CoveredMilli(selector);
    if (covered <= 0) continue;
    for (const auto& [c, m] : capacity_) {
      if (SelectorMatches(selector, c.first, c.second)) {
        cards[c] += std::llround(milli * static_cast<double>(m) / static_cast<double>(covered));
      }
    }
  }
  if (auto it = held_.find(group); it != held_.end()) {
    for (const auto& [c, m] : it->second) cards[c] = std::max(cards[c], m);
  }
  return cards;
}

void FairShareLedger::AddPastUsage(const std::string& group, const std::string& user, const CardClass& card_class,
                                   int64_t milli, absl::Time start, absl::Time end) {
  if (observed_at_ == absl::InfinitePast() || milli <= 0) return;
  if (within_groups_) UsersOf(group).AddPastUsage(user, "", card_class, milli, start, end);
  end = std::min(end, observed_at_);
  start = std::min(start, end);
  // (ln 2 / H) * integral over [start, end] of milli * 2^-((now - t) / H) dt, in closed form.
  const double added = static_cast<double>(milli) * (Halving(observed_at_ - end, config_.usage_half_life) -
                                                     Halving(observed_at_ - start, config_.usage_half_life));
  if (added > 0) decayed_[group][card_class] += added;
}

void FairShareLedger::Hold(const std::string& group, const std::string& user, const CardClass& card_class,
                           int64_t milli) {
  held_[group][card_class] += milli;
  if (within_groups_) UsersOf(group).Hold(user, "", card_class, milli);
}

std::set<std::string> FairShareLedger::KnownGroups() const {
  std::set<std::string> groups;
  for (const auto& [name, queue] : config_.groups) groups.insert(name);
  for (const auto& [name, classes] : held_) groups.insert(name);
  for (const auto& [name, classes] : decayed_) groups.insert(name);
  return groups;
}

std::vector<std::pair<std::string, double>> FairShareLedger::Entitlements(const std::string& group) const {
  const GroupQueue queue = config_.For(group);
  std::vector<std::pair<std::string, double>> out;
  if (!queue.nominal_milli.empty()) {
    for (const auto& [selector, milli] : queue.nominal_milli) out.emplace_back(selector, static_cast<double>(milli));
    return out;
  }
  // The groups without nominal cards share what the others do not own, by weight, class by class
  // (dominant-resource fairness over the classes of cards). A selector's nominal cards are taken
  // from the classes it covers in proportion to their size.
  double total_weight = 0;
  std::map<std::string, int64_t> owned;  // selector -> milli-cards some group owns
  for (const auto& name : KnownGroups()) {
    const GroupQueue other = config_.For(name);
    if (other.nominal_milli.empty()) total_weight += other.weight;
    for (const auto& [selector, milli] : other.nominal_milli) owned[selector] += milli;
  }
  std::map<std::string, int64_t> covered;  // selector -> milli-cards of the classes it covers
  for (const auto& [selector, owned_milli] : owned) covered[selector] = CoveredMilli(selector);
  const double part = total_weight > 0 ? queue.weight / total_weight : 1.0;
  for (const auto& [card_class, milli] : capacity_) {
    double left = static_cast<double>(milli);
    for (const auto& [selector, owned_milli] : owned) {
      if (!SelectorMatches(selector, card_class.first, card_class.second)) continue;
      left -= static_cast<double>(owned_milli) * static_cast<double>(milli) / static_cast<double>(covered[selector]);
    }
    out.emplace_back(card_class.second, std::max(0.0, left) * part);
  }
  return out;
}

double FairShareLedger::HeldMatching(const std::string& group, const std::string& selector) const {
  double held = 0;
  if (auto it = held_.find(group); it != held_.end()) {
    for (const auto& [card_class, milli] : it->second) {
      if (SelectorMatches(selector, card_class.first, card_class.second)) held += static_cast<double>(milli);
    }
  }
  return held;
}

double FairShareLedger::Usage(const std::string& group, const std::string& selector) const {
  double decayed = 0;
  if (auto it = decayed_.find(group); it != decayed_.end()) {
    for (const auto& [card_class, milli] : it->second) {
      if (SelectorMatches(selector, card_class.first, card_class.second)) decayed += milli;
    }
  }
  // What it holds now counts at once; what it held before counts as long as it is remembered.
  return std::max(HeldMatching(group, selector), decayed);
}

double FairShareLedger::Share(const std::string& group) const { return DominantShare(group, Entitlements(group)); }

const FairShareLedger* FairShareLedger::FindUsers(const std::string& group) const {
  auto it = users_.find(group);
  return it == users_.end() ? nullptr : it->second.get();
}

double FairShareLedger::UserShare(const std::string& group, const std::string& user) const {
  const FairShareLedger* users = FindUsers(group);
  return users == nullptr ? 0 : users->Share(user);
}

double FairShareLedger::UserClassShare(const std::string& group, const std::string& user,
                                       const CardClass& card_class) const {
  const FairShareLedger* users = FindUsers(group);
  return users == nullptr ? 0 : users->ClassShare(user, card_class);
}

double FairShareLedger::UserHeldShare(const std::string& group, const std::string& user,
                                      const CardHoldings& plus) const {
  const FairShareLedger* users = FindUsers(group);
  return users == nullptr ? 0 : users->HeldShare(user, plus);
}

double FairShareLedger::ClassShare(const std::string& group, const CardClass& card_class, int64_t plus_milli) const {
  double share = -1;  // no selector covers the class yet
  for (const auto& [selector, entitled] : Entitlements(group)) {
    if (!SelectorMatches(selector, card_class.first, card_class.second)) continue;
    const double used = HeldMatching(group, selector) + static_cast<double>(plus_milli);
    share = std::max(share, used <= 0 ? 0.0 : entitled > 0 ? used / entitled : kNoEntitlement);
  }
  if (share >= 0) return share;
  double held = static_cast<double>(plus_milli);
  if (auto it = held_.find(group); it != held_.end()) {
    if (auto c = it->second.find(card_class); c != it->second.end()) held += static_cast<double>(c->second);
  }
  return held > 0 ? kNoEntitlement : 0;
}

double FairShareLedger::HeldShare(const std::string& group, const CardHoldings& plus) const {
  return LargestRatio(Entitlements(group), [&](const std::string& selector) {
    double used = HeldMatching(group, selector);
    for (const auto& [card_class, milli] : plus) {
      if (SelectorMatches(selector, card_class.first, card_class.second)) used += static_cast<double>(milli);
    }
    return used;
  });
}

double FairShareLedger::DominantShare(const std::string& group,
                                      const std::vector<std::pair<std::string, double>>& entitlements) const {
  return LargestRatio(entitlements, [&](const std::string& selector) { return Usage(group, selector); });
}

std::vector<GroupShare> FairShareLedger::Groups() const {
  std::vector<GroupShare> out;
  for (const auto& name : KnownGroups()) {
    const GroupQueue queue = config_.For(name);
    const auto entitlements = Entitlements(name);
    GroupShare g;
    g.group = name;
    g.weight = queue.weight;
    for (const auto& [selector, milli] : queue.nominal_milli) g.nominal[selector] = static_cast<double>(milli) / 1000;
    if (auto star = queue.nominal_milli.find("*"); star != queue.nominal_milli.end()) {
      g.entitled = static_cast<double>(star->second) / 1000;
    } else {
      for (const auto& [selector, milli] : entitlements) g.entitled += milli / 1000;
    }
    // Held above the entitlement: summed over the classes of a group entitled by weight; the
    // largest overage of one selector for nominal cards (selectors may overlap).
    for (const auto& [selector, milli] : entitlements) {
      const double over = std::max(0.0, HeldMatching(name, selector) - milli) / 1000;
      g.borrowed = queue.nominal_milli.empty() ? g.borrowed + over : std::max(g.borrowed, over);
    }
    if (auto it = held_.find(name); it != held_.end()) {
      for (const auto& [card_class, milli] : it->second) g.used += static_cast<double>(milli) / 1000;
    }
    if (auto it = decayed_.find(name); it != decayed_.end()) {
      for (const auto& [card_class, milli] : it->second) g.decayed += milli / 1000;
    }
    g.share = DominantShare(name, entitlements);
    if (const FairShareLedger* users = FindUsers(name)) {
      // Each user's part by weight of the group's cards (GroupCards), what it holds above that
      // part, and its share of it.
      g.users = users->Groups();
    }
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace hetpool::daemon
