#include "src/daemon/accounting/usage.h"

#include <algorithm>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "src/common/convert.h"
#include "src/daemon/state/quota_ledger.h"

namespace hetpool::daemon {
namespace {

namespace pb = ::hetpool::v1;

double Price(const pb::Job& job, const planner::PriceTable& prices) {
  if (job.placement_size() == 0) return 0;
  planner::PoolClass cls;
  cls.fingerprint = job.placement(0).fingerprint();
  cls.label = job.placement(0).class_label();
  const planner::ClassPricing* row = prices.Find(cls);
  return row == nullptr ? 0 : row->price_per_card_hour;
}

}  // namespace

std::vector<UsageWindow> RunningSpans(const pb::Job& job, absl::Time now) {
  std::vector<UsageWindow> spans;
  std::optional<absl::Time> running_since;
  auto close = [&](absl::Time end) {
    if (running_since && end > *running_since) spans.push_back({*running_since, end});
    running_since.reset();
  };
  for (const auto& event : job.events()) {
    const absl::Time at = FromProtoTime(event.time());
    if (event.state() == pb::JOB_STATE_RUNNING) {
      if (!running_since) running_since = at;
    } else {
      close(at);
    }
  }
  close(now);  // still running
  return spans;
}

double RunningHours(const pb::Job& job, const UsageWindow& window) {
  double hours = 0;
  for (const UsageWindow& span : RunningSpans(job, window.until)) {
    const absl::Time from = std::max(span.since, window.since);
    const absl::Time to = std::min(span.until, window.until);
    if (to > from) hours += absl::ToDoubleHours(to - from);
  }
  return hours;
}

absl::StatusOr<pb::UsageResponse> ComputeUsage(const std::vector<pb::Job>& jobs, const UsageWindow& window,
                                               const std::string& by, const planner::PriceTable& prices) {
  const std::string group_by = by.empty() ? "job" : by;
  if (group_by != "job" && group_by != "user" && group_by != "group" && group_by != "class") {
    return absl::InvalidArgumentError(absl::StrCat("by: '", by, "' is not one of job, user, group, class"));
  }
  if (window.until <= window.since) return absl::InvalidArgumentError("since: must be before until");
  std::map<std::string, pb::UsageRow> rows;
  pb::UsageResponse response;
  for (const pb::Job& job : jobs) {
    const double card_hours = RunningHours(job, window) * (CardsNeeded(job.spec()) / 1000.0);
    if (card_hours <= 0) continue;
    const std::string fingerprint = job.placement_size() ? job.placement(0).fingerprint() : "";
    const std::string label = job.placement_size() ? job.placement(0).class_label() : "cpu";
    std::string key = group_by == "job"     ? job.id()
                      : group_by == "user"  ? job.spec().user()
                      : group_by == "group" ? (job.spec().group().empty() ? "-" : job.spec().group())
                                            : (label.empty() ? "-" : label);
    pb::UsageRow& row = rows[key];
    row.set_key(key);
    if (group_by == "job" || group_by == "user") {
      row.set_user(job.spec().user());
      row.set_group(job.spec().group());
    }
    if (group_by == "group") row.set_group(job.spec().group());
    if (group_by == "job" || group_by == "class") {
      row.set_class_label(label);
      row.set_fingerprint(fingerprint);
    }
    const double cost = card_hours * Price(job, prices);
    row.set_jobs(row.jobs() + 1);
    row.set_card_hours(row.card_hours() + card_hours);
    row.set_cost(row.cost() + cost);
    response.set_total_card_hours(response.total_card_hours() + card_hours);
    response.set_total_cost(response.total_cost() + cost);
  }
  std::vector<pb::UsageRow> sorted;
  for (auto& [key, row] : rows) sorted.push_back(std::move(row));
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const pb::UsageRow& a, const pb::UsageRow& b) { return a.card_hours() > b.card_hours(); });
  for (auto& row : sorted) *response.add_rows() = std::move(row);
  response.set_currency(prices.currency);
  *response.mutable_since() = ToProtoTime(window.since);
  *response.mutable_until() = ToProtoTime(window.until);
  return response;
}

}  // namespace hetpool::daemon
