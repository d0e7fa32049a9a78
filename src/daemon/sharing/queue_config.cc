#include "src/daemon/sharing/queue_config.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "src/common/flags.h"

namespace hetpool::daemon {
namespace {

absl::Status Invalid(absl::string_view where, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", problem));
}

bool IsWeight(const nlohmann::json& j) {
  return j.is_number() && std::isfinite(j.get<double>()) && j.get<double>() > 0 && j.get<double>() <= 1e6;
}

absl::StatusOr<GroupQueue> ParseGroup(const std::string& where, const nlohmann::json& j, double default_weight) {
  if (!j.is_object()) return Invalid(where, "expected an object with weight, nominal and/or users");
  GroupQueue queue{default_weight, {}, {}};
  for (const auto& [key, value] : j.items()) {
    if (key == "weight") {
      if (!IsWeight(value)) return Invalid(where + ".weight", "expected a number above 0 and at most 1e6");
      queue.weight = value.get<double>();
    } else if (key == "nominal") {
      if (!value.is_object()) return Invalid(where + ".nominal", "expected {\"selector\": cards}");
      for (const auto& [selector, count] : value.items()) {
        const std::string at = absl::StrCat(where, ".nominal[", selector, "]");
        if (selector.empty() || selector.size() > 64) return Invalid(at, "selector must be 1-64 characters");
        if (!count.is_number() || !std::isfinite(count.get<double>()) || count.get<double>() < 0 ||
            count.get<double>() > 1e9) {
          return Invalid(at, "expected a card count between 0 and 1e9 (fractions allowed)");
        }
        queue.nominal_milli[selector] = std::llround(count.get<double>() * 1000);
      }
    } else if (key == "users") {
      if (!value.is_object()) return Invalid(where + ".users", "expected {\"user\": {\"weight\": w}}");
      for (const auto& [user, entry] : value.items()) {
        const std::string at = absl::StrCat(where, ".users[", user, "]");
        if (user.empty() || user.size() > 64) return Invalid(at, "user names must be 1-64 characters");
        if (!entry.is_object()) return Invalid(at, "expected {\"weight\": w}");
        double weight = 1;
        for (const auto& [field, w] : entry.items()) {
          if (field != "weight") return Invalid(at, absl::StrCat("unknown key '", field, "' (weight)"));
          if (!IsWeight(w)) return Invalid(at + ".weight", "expected a number above 0 and at most 1e6");
          weight = w.get<double>();
        }
        queue.user_weights[user] = weight;
      }
    } else {
      return Invalid(where, absl::StrCat("unknown key '", key, "' (weight, nominal, users)"));
    }
  }
  return queue;
}

}  // namespace

absl::StatusOr<QueueConfig> QueueConfig::Parse(absl::string_view json_text) {
  const auto doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return absl::InvalidArgumentError("not valid JSON");
  if (!doc.is_object()) return absl::InvalidArgumentError("expected a JSON object");
  QueueConfig config;
  for (const auto& [key, value] : doc.items()) {
    if (key == "usage_half_life") {
      auto d = value.is_string() ? ParseDurationFlag(value.get<std::string>())
                                 : absl::StatusOr<absl::Duration>(absl::InvalidArgumentError("expected a string"));
      if (!d.ok() || *d <= absl::ZeroDuration()) {
        return Invalid("usage_half_life", "expected a duration above zero (\"24h\", \"7d\" as \"168h\")");
      }
      config.usage_half_life = *d;
    } else if (key == "default_weight") {
      if (!IsWeight(value)) return Invalid("default_weight", "expected a number above 0 and at most 1e6");
      config.default_weight = value.get<double>();
    } else if (key != "groups") {
      return Invalid(key, "unknown key (usage_half_life, default_weight, groups)");
    }
  }
  if (doc.contains("groups")) {
    const auto& groups = doc["groups"];
    if (!groups.is_object()) return Invalid("groups", "expected {\"name\": {...}}");
    for (const auto& [name, value] : groups.items()) {
      if (name.empty() || name.size() > 64) return Invalid("groups", "names must be 1-64 characters");
      auto queue = ParseGroup(absl::StrCat("groups[", name, "]"), value, config.default_weight);
      if (!queue.ok()) return queue.status();
      config.groups[name] = *std::move(queue);
    }
  }
  return config;
}

double GroupQueue::UserWeight(const std::string& user) const {
  auto it = user_weights.find(user);
  return it == user_weights.end() ? kUnlistedUserWeight : it->second;
}

GroupQueue QueueConfig::For(const std::string& group) const {
  auto it = groups.find(group);
  return it == groups.end() ? GroupQueue{default_weight, {}, {}} : it->second;
}

}  // namespace hetpool::daemon
