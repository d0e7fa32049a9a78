#include "src/daemon/state/card_suspicion.h"

#include <algorithm>
#include <cmath>
#include <iterator>
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
                                                                   const std::string& evidence, absl::Time now,
                                                                   int needed) {
  failures_[card].push_back(Failure{now, job_id, evidence});
  if (needed <= 0) needed = options_.quarantine_after;
  if (options_.quarantine_after <= 0 || DistinctJobs(card, now) < needed) return std::nullopt;
  std::vector<std::string> said;
  for (const Failure& f : failures_[card]) said.push_back(f.evidence);
  return said;
}

void CardSuspicion::NoteEarlyFailure(const std::string& job_id,
                                     const std::vector<std::pair<std::string, std::string>>& cards,
                                     const std::string& evidence, absl::Time now) {
  if (options_.early_failure <= absl::ZeroDuration() || cards.empty()) return;
  // Jobs never vindicated (they failed for good, or fail early everywhere) are forgotten once
  // their last early failure is past the window: the map holds only the window's.
  for (auto it = early_.begin(); it != early_.end();) {
    it = it->second.back().at <= now - options_.quarantine_window ? early_.erase(it) : std::next(it);
  }
  constexpr size_t kKeptPerJob = 4;  // a job restarted many times does not grow the daemon
  std::deque<EarlyFailure>& kept = early_[job_id];
  kept.push_back({now, cards, evidence});
  while (kept.size() > kKeptPerJob) kept.pop_front();
}

std::vector<std::pair<std::pair<std::string, std::string>, std::string>> CardSuspicion::TakeVindicated(
    const std::string& job_id, const std::vector<std::pair<std::string, std::string>>& running_on, absl::Time now) {
  std::vector<std::pair<std::pair<std::string, std::string>, std::string>> out;
  auto it = early_.find(job_id);
  if (it == early_.end()) return out;
  std::set<std::pair<std::string, std::string>> counted;  // a card once per job
  for (const EarlyFailure& f : it->second) {
    if (f.at <= now - options_.quarantine_window) continue;
    for (const auto& card : f.cards) {
      const bool still_on_it = std::find(running_on.begin(), running_on.end(), card) != running_on.end();
      if (!still_on_it && counted.insert(card).second) out.push_back({card, f.evidence});
    }
  }
  early_.erase(it);
  for (const auto& [card, evidence] : out) vindicated_.push_back({now, card});
  return out;
}

int CardSuspicion::EarlyFailuresNeeded(const std::pair<std::string, std::string>& card, size_t cards, absl::Time now) {
  while (!vindicated_.empty() && vindicated_.front().first <= now - options_.quarantine_window) {
    vindicated_.pop_front();
  }
  const auto others =
      std::count_if(vindicated_.begin(), vindicated_.end(), [&](const auto& v) { return v.second != card; });
  const double mean = cards <= 1 ? 0 : static_cast<double>(others) / static_cast<double>(cards - 1);
  // P(X >= k) for X ~ Poisson(mean), from k = 0 up until under 1e-3.
  double term = std::exp(-mean), below = 0;  // P(X = k), P(X < k)
  int k = 0;
  while (1 - below >= 1e-3 && k < 1000) {
    below += term;
    ++k;
    term *= mean / k;
  }
  return std::max(options_.quarantine_after, k);
}

}  // namespace hetpool::daemon
