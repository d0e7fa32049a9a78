// Fair-share queues: what each group of the pool is entitled to, read from the daemon's
// --queues file (re-read when it changes).
//
//   {"usage_half_life": "24h",          // past usage counts half after this long (Slurm's decay)
//    "default_weight": 1,               // groups not listed below
//    "groups": {"vision": {"weight": 2, "nominal": {"*": 16, "nvidia": 8}},
//               "nlp":    {"weight": 1, "users": {"alice": {"weight": 2}}}}}
//
// A group with `nominal` cards (selectors as in quotas: "*", a vendor, a fingerprint class id) is
// entitled to those; a group without is entitled to its weight's part of each class of cards.
// Idle entitlement is lent: anyone may use free cards, and the queue order (fair_share.h) offers
// freed cards to the groups furthest below their entitlement first. Within a group, its users
// share its cards the same way by their weights (1 for users not listed): among the group's jobs,
// those of the user furthest below their part go first.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hetpool::daemon {

inline constexpr double kUnlistedUserWeight = 1;  // a user a group's `users` does not list

struct GroupQueue {
  double weight = 1;
  std::map<std::string, int64_t> nominal_milli;  // selector -> milli-cards; empty: by weight
  std::map<std::string, double> user_weights;    // user -> weight within the group; others weigh 1

  double UserWeight(const std::string& user) const;  // from user_weights, else kUnlistedUserWeight
};

struct QueueConfig {
  absl::Duration usage_half_life = absl::Hours(24);
  double default_weight = 1;
  std::map<std::string, GroupQueue> groups;

  // INVALID_ARGUMENT naming the key that is wrong.
  static absl::StatusOr<QueueConfig> Parse(absl::string_view json_text);
  // The group's entry, or the default weight and no nominal cards.
  GroupQueue For(const std::string& group) const;
};

}  // namespace hetpool::daemon
