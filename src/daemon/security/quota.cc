#include "src/daemon/security/quota.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace hetpool::daemon {
namespace {

absl::Status Invalid(absl::string_view where, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", problem));
}

absl::StatusOr<QuotaLimits> ParseLimits(const std::string& where, const nlohmann::json& j) {
  if (!j.is_object()) return Invalid(where, "expected an object with cards and/or queued_jobs");
  QuotaLimits limits;
  for (const auto& [key, value] : j.items()) {
    if (key == "cards") {
      if (!value.is_object()) return Invalid(where + ".cards", "expected {\"selector\": count}");
      for (const auto& [selector, count] : value.items()) {
        const std::string at = absl::StrCat(where, ".cards[", selector, "]");
        if (selector.empty() || selector.size() > 64) return Invalid(at, "selector must be 1-64 characters");
        if (!count.is_number() || count.get<double>() < 0 || count.get<double>() > 1e9 ||
            std::isnan(count.get<double>())) {
          return Invalid(at, "expected a card count between 0 and 1e9 (fractions allowed)");
        }
        limits.cards_milli[selector] = std::llround(count.get<double>() * 1000);
      }
    } else if (key == "queued_jobs") {
      if (!value.is_number_integer() || value.get<int64_t>() < 0)
        return Invalid(where + ".queued_jobs", "expected a count >= 0");
      limits.queued_jobs = value.get<int64_t>();
    } else {
      return Invalid(where, absl::StrCat("unknown key '", key, "' (cards, queued_jobs)"));
    }
  }
  return limits;
}

absl::Status ParseOwners(const nlohmann::json& doc, const char* key, std::map<std::string, QuotaLimits>* out) {
  if (!doc.contains(key)) return absl::OkStatus();
  if (!doc[key].is_object()) return Invalid(key, "expected {\"name\": {...}}");
  for (const auto& [name, value] : doc[key].items()) {
    if (name.empty() || name.size() > 64) return Invalid(key, "names must be 1-64 characters");
    auto limits = ParseLimits(absl::StrCat(key, "[", name, "]"), value);
    if (!limits.ok()) return limits.status();
    (*out)[name] = *std::move(limits);
  }
  return absl::OkStatus();
}

// The held milli-cards matching a selector.
int64_t Held(const CardHoldings& holds, const std::string& selector) {
  int64_t sum = 0;
  for (const auto& [key, milli] : holds) {
    if (SelectorMatches(selector, key.first, key.second)) sum += milli;
  }
  return sum;
}

std::optional<std::string> Check(const std::string& scope, const QuotaLimits* limits, const CardHoldings& holds,
                                 const std::string& vendor, const std::string& fingerprint, int64_t need) {
  if (limits == nullptr) return std::nullopt;
  for (const auto& [selector, limit] : limits->cards_milli) {
    if (!SelectorMatches(selector, vendor, fingerprint)) continue;
    const int64_t held = Held(holds, selector);
    if (held + need > limit) {
      return absl::StrCat("quota: ", scope, " holds ", MilliCards(held), " of ", MilliCards(limit), " cards (",
                          selector, "); the job needs ", MilliCards(need));
    }
  }
  return std::nullopt;
}

}  // namespace

bool SelectorMatches(const std::string& selector, const std::string& vendor, const std::string& fingerprint) {
  return selector == "*" || selector == vendor || selector == fingerprint;
}

std::string MilliCards(int64_t milli) {
  if (milli % 1000 == 0) return absl::StrCat(milli / 1000);
  return absl::StrFormat("%.3g", static_cast<double>(milli) / 1000.0);
}

absl::StatusOr<QuotaTable> QuotaTable::Parse(absl::string_view json_text) {
  nlohmann::json doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return absl::InvalidArgumentError("not valid JSON");
  if (!doc.is_object()) return absl::InvalidArgumentError("expected a JSON object");
  QuotaTable table;
  for (const auto& [key, value] : doc.items()) {
    if (key == "on_exceed") {
      if (!value.is_string() || (value != "wait" && value != "reject")) {
        return Invalid("on_exceed", "expected \"wait\" or \"reject\"");
      }
      table.reject_ = value == "reject";
    } else if (key == "default_user") {
      auto limits = ParseLimits("default_user", value);
      if (!limits.ok()) return limits.status();
      table.default_user_ = *std::move(limits);
    } else if (key != "users" && key != "groups") {
      return Invalid(key, "unknown key (on_exceed, default_user, users, groups)");
    }
  }
  if (auto s = ParseOwners(doc, "users", &table.users_); !s.ok()) return s;
  if (auto s = ParseOwners(doc, "groups", &table.groups_); !s.ok()) return s;
  return table;
}

const QuotaLimits* QuotaTable::ForUser(const std::string& user) const {
  auto it = users_.find(user);
  if (it != users_.end()) return &it->second;
  return default_user_ ? &*default_user_ : nullptr;
}

const QuotaLimits* QuotaTable::ForGroup(const std::string& group) const {
  if (group.empty()) return nullptr;
  auto it = groups_.find(group);
  return it == groups_.end() ? nullptr : &it->second;
}

std::optional<std::string> QuotaTable::CardsBlocked(const std::string& user, const CardHoldings& user_holds,
                                                    const std::string& group, const CardHoldings& group_holds,
                                                    const std::string& vendor, const std::string& fingerprint,
                                                    int64_t need) const {
  if (need <= 0) return std::nullopt;
  if (auto why = Check(absl::StrCat("user ", user), ForUser(user), user_holds, vendor, fingerprint, need)) return why;
  return Check(absl::StrCat("group ", group), ForGroup(group), group_holds, vendor, fingerprint, need);
}

std::optional<std::string> QuotaTable::QueueBlocked(const std::string& user, int64_t user_queued,
                                                    const std::string& group, int64_t group_queued) const {
  if (const QuotaLimits* l = ForUser(user); l != nullptr && l->queued_jobs && user_queued >= *l->queued_jobs) {
    return absl::StrCat("quota: user ", user, " has ", user_queued, " queued jobs (limit ", *l->queued_jobs, ")");
  }
  if (const QuotaLimits* l = ForGroup(group); l != nullptr && l->queued_jobs && group_queued >= *l->queued_jobs) {
    return absl::StrCat("quota: group ", group, " has ", group_queued, " queued jobs (limit ", *l->queued_jobs, ")");
  }
  return std::nullopt;
}

}  // namespace hetpool::daemon
