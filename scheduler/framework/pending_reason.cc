#include "scheduler/framework/pending_reason.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace hetpool::scheduler {
namespace {

constexpr char kTypeUrl[] = "type.hetpool.dev/hetpool.scheduler.PendingReason";

}  // namespace

std::string PendingReason::Message() const {
  std::string out = absl::StrCat(never ? "can never run in this pool: needs " : "waiting for capacity: needs ", needs);
  if (!closest.empty()) absl::StrAppend(&out, "; ", closest);
  if (!nodes_rejected.empty()) {
    std::vector<std::string> parts;
    for (const auto& [plugin, n] : nodes_rejected) parts.push_back(absl::StrCat(plugin, " ", n));
    absl::StrAppend(&out, "; nodes turned away by ", absl::StrJoin(parts, ", "));
  }
  if (!device_reasons.empty()) absl::StrAppend(&out, " (", absl::StrJoin(device_reasons, "; "), ")");
  return out;
}

void AttachPendingReason(absl::Status& status, const PendingReason& reason) {
  if (status.ok()) return;
  const nlohmann::json j = {{"never", reason.never},
                            {"needs", reason.needs},
                            {"closest", reason.closest},
                            {"nodes_rejected", reason.nodes_rejected},
                            {"device_reasons", reason.device_reasons},
                            {"waiting_reasons", reason.waiting_reasons}};
  status.SetPayload(kTypeUrl, absl::Cord(j.dump()));
}

bool HasPendingReason(const absl::Status& status) { return status.GetPayload(kTypeUrl).has_value(); }

std::optional<PendingReason> PendingReasonOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kTypeUrl);  // absl::optional in this absl
  if (!payload) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(std::string(*payload), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  PendingReason r;
  r.never = j.value("never", false);
  r.needs = j.value("needs", "");
  r.closest = j.value("closest", "");
  if (j.contains("nodes_rejected") && j["nodes_rejected"].is_object()) {
    for (const auto& [k, v] : j["nodes_rejected"].items()) {
      if (v.is_number_integer()) r.nodes_rejected[k] = v.get<int>();
    }
  }
  if (j.contains("device_reasons") && j["device_reasons"].is_array()) {
    for (const auto& v : j["device_reasons"]) {
      if (v.is_string()) r.device_reasons.push_back(v.get<std::string>());
    }
  }
  if (j.contains("waiting_reasons") && j["waiting_reasons"].is_object()) {
    for (const auto& [k, v] : j["waiting_reasons"].items()) {
      if (v.is_string()) r.waiting_reasons[k] = v.get<std::string>();
    }
  }
  return r;
}

}  // namespace hetpool::scheduler
