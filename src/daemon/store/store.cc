#include "src/daemon/store/store.h"

#include <algorithm>

#include "src/daemon/store/parse_rows.h"

namespace hetpool::daemon {

absl::StatusOr<std::vector<hetpool::v1::Job>> Store::LoadJobs() {
  auto rows = LoadJobRows();
  if (!rows.ok()) return rows.status();
  auto jobs = ParseRows<hetpool::v1::Job>(*std::move(rows), "job row");
  if (!jobs.ok()) return jobs;
  std::stable_sort(jobs->begin(), jobs->end(),
                   [](const auto& a, const auto& b) { return a.submit_seq() < b.submit_seq(); });
  return jobs;
}

absl::StatusOr<std::vector<hetpool::v1::Node>> Store::LoadNodes() {
  auto rows = LoadNodeRows();
  if (!rows.ok()) return rows.status();
  return ParseRows<hetpool::v1::Node>(*std::move(rows), "node row");
}

}  // namespace hetpool::daemon
