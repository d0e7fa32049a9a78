#include "src/daemon/state/card_suspicion.h"

#include <set>

namespace hetpool::daemon {

int CardSuspicion::DistinctJobs(const std::pair<std::string, std::string>& card, absl::Time now) {
  auto it = failures_.find(card);
  if (it == failures_.end()) return 0;
  auto& seen = it->second;
  while (!seen.empty() && seen.front().at <= now - options_.quarantine_window) seen.pop_front();
  std::set<std::string> jobs;
  for (const Failure& f : seen) jobs.insert(f.job_id);
  if (seen.empty()) failures_.erase(it);
  return static_cast<int>(jobs.size());
}

std::optional<std::vector<std::string>> CardSuspicion::NoteFailure(const std::pair<std::string, std::string>& card,
                                                                   const std::string& job_id,
                                                                   const std::string& evidence, absl::Time now) {
  failures_[card].push_back(Failure{now, job_id, evidence});
  if (options_.quarantine_after <= 0 || DistinctJobs(card, now) < options_.quarantine_after) return std::nullopt;
  std::vector<std::string> said;
  for (const Failure& f : failures_[card]) said.push_back(f.evidence);
  return said;
}

}  // namespace hetpool::daemon
