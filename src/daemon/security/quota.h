// Quotas: how many cards (by vendor or fingerprint class, fractional shares counted by their
// fraction) a user or a group may hold at once, and how many jobs they may have queued.
//
//   {"on_exceed": "wait",                      // or "reject": refuse a submission over quota now
//    "default_user": {"cards": {"*": 4}, "queued_jobs": 100},   // users without an entry
//    "users":  {"alice": {"cards": {"*": 8, "nvidia": 4, "fp-3a9c0d12e4f1": 2}, "queued_jobs": 50}},
//    "groups": {"vision": {"cards": {"*": 16}}}}
//
// A card selector is "*" (every card), a vendor, or a fingerprint class id. Every limit whose
// selector matches a card applies to it: alice above may hold 4 NVIDIA cards and 8 in all.
// Pure: the daemon supplies what each owner holds; tests check every rule.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hetpool::daemon {

struct QuotaLimits {
  std::map<std::string, int64_t> cards_milli;  // selector -> milli-cards
  std::optional<int64_t> queued_jobs;
};

// (vendor, fingerprint): a class of identical cards.
using CardClass = std::pair<std::string, std::string>;
// What one owner (a user, or a group) holds, by card class, in milli-cards.
using CardHoldings = std::map<CardClass, int64_t>;

class QuotaTable {
 public:
  // INVALID_ARGUMENT naming the key that is wrong.
  static absl::StatusOr<QuotaTable> Parse(absl::string_view json_text);

  bool reject_over_quota() const { return reject_; }
  // The limits on a user (their entry, else default_user) and on a group (none when "").
  const QuotaLimits* ForUser(const std::string& user) const;
  const QuotaLimits* ForGroup(const std::string& group) const;

  // Whether `need` more milli-cards of (vendor, fingerprint) would stay within every limit on the
  // user and the group; otherwise why not ("user alice holds 6 of 8 cards (*); needs 4 more").
  std::optional<std::string> CardsBlocked(const std::string& user, const CardHoldings& user_holds,
                                          const std::string& group, const CardHoldings& group_holds,
                                          const std::string& vendor, const std::string& fingerprint,
                                          int64_t need) const;
  // Why one more queued job is refused, given the user's and group's queued counts.
  std::optional<std::string> QueueBlocked(const std::string& user, int64_t user_queued, const std::string& group,
                                          int64_t group_queued) const;
  bool empty() const { return users_.empty() && groups_.empty() && !default_user_; }

 private:
  bool reject_ = false;
  std::map<std::string, QuotaLimits> users_;
  std::map<std::string, QuotaLimits> groups_;
  std::optional<QuotaLimits> default_user_;
};

// Whether a card selector ("*", a vendor, a fingerprint class id) takes cards of this class.
bool SelectorMatches(const std::string& selector, const std::string& vendor, const std::string& fingerprint);

// "6.5" for 6500 milli-cards.
std::string MilliCards(int64_t milli);

}  // namespace hetpool::daemon
