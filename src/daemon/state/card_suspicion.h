// Which cards are suspected of failing jobs, before (or without) any vendor signal: a card on
// which jobs of different ids fail with a hardware signature (hardware_signatures.h) `failures`
// times within `window` is quarantined (by default 2 within an hour, the rule of issue 61; one
// job failing twice on one card proves less than two jobs failing there). Thread-free, on the
// clock it is given; the quarantine itself is NodeRegistry's (stored with the node).
#pragma once

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace hetpool::daemon {

struct HardwareFaultOptions {
  int quarantine_after = 2;  // failures of distinct jobs on one card; 0: never
  absl::Duration quarantine_window = absl::Hours(1);
  // Requeues of one job after hardware failures before it fails for good ("hardware suspected
  // on N cards"): a job that breaks every card it touches does not wander the pool for ever.
  int max_hardware_requeues = 3;
  // A card quarantined for a fatal vendor signal returns by itself once its agent reports it
  // healthy with no fatal signal left (reset, or repaired) and its node passes its health check;
  // off by default: the operator returns cards (hetpoolctl return-card).
  bool return_cleared_cards = false;
  // Node-wide evidence takes out the node: this many of its cards quarantined (0: never).
  // Jobs of `quarantine_after` ids failing with a node-wide signature (its network) do too.
  int quarantine_node_after_cards = 3;
  // A generation that fails as the job's own within this long of its start, on cards the job
  // later runs past this long on (or succeeds on) elsewhere, counts against the cards it failed
  // on as a hardware failure would: a card that kills jobs in their first seconds without a
  // signature. Until the job is vindicated so, nothing counts: a job that fails early anywhere
  // (a typo in a sweep) suspects no card. 0: off.
  absl::Duration early_failure = absl::Seconds(60);
};

class CardSuspicion {
 public:
  explicit CardSuspicion(HardwareFaultOptions options) : options_(options) {}

  // A generation of `job_id` failed on `card` (node, device id) with a hardware signature at
  // `now`, `evidence` saying how. When the card is now past the rule: the evidence of each
  // failure counted (quarantine it); else nullopt.
  // `needed`: distinct jobs that quarantine the card (0: the rule's quarantine_after).
  std::optional<std::vector<std::string>> NoteFailure(const std::pair<std::string, std::string>& card,
                                                      const std::string& job_id, const std::string& evidence,
                                                      absl::Time now, int needed = 0);
  const HardwareFaultOptions& options() const { return options_; }
  // The card came back from quarantine (an operator returned it): its count starts again.
  void Forget(const std::pair<std::string, std::string>& card) { failures_.erase(card); }
  // Distinct jobs that failed on `card` within the window before `now`.
  int DistinctJobs(const std::pair<std::string, std::string>& card, absl::Time now);

  // A generation of `job_id` failed early on `cards` (node, device id each), not yet held
  // against them (at most a few kept per job).
  void NoteEarlyFailure(const std::string& job_id, const std::vector<std::pair<std::string, std::string>>& cards,
                        const std::string& evidence, absl::Time now);
  bool HasEarlyFailures(const std::string& job_id) const { return early_.contains(job_id); }
  size_t JobsWithEarlyFailures() const { return early_.size(); }
  // How many vindicated early failures quarantine `card`, of a pool of `cards` cards, now: the
  // rule's quarantine_after while early failures are rare, more where they are common (a flaky
  // filesystem fails jobs early on every card alike): the count a card reaches by chance, at
  // the rate of the pool's other cards over the window, with probability under 1 in 1,000
  // (Poisson).
  int EarlyFailuresNeeded(const std::pair<std::string, std::string>& card, size_t cards, absl::Time now);
  // The job ran past the early window (or succeeded) on `running_on`: its early failures on other
  // cards within the window, now evidence against those cards, as (card, evidence); forgotten.
  std::vector<std::pair<std::pair<std::string, std::string>, std::string>> TakeVindicated(
      const std::string& job_id, const std::vector<std::pair<std::string, std::string>>& running_on, absl::Time now);

 private:
  HardwareFaultOptions options_;
  struct Failure {
    absl::Time at;
    std::string job_id;
    std::string evidence;
  };
  std::map<std::pair<std::string, std::string>, std::deque<Failure>> failures_;
  struct EarlyFailure {
    absl::Time at;
    std::vector<std::pair<std::string, std::string>> cards;
    std::string evidence;
  };
  std::map<std::string, std::deque<EarlyFailure>> early_;                              // by job id
  std::deque<std::pair<absl::Time, std::pair<std::string, std::string>>> vindicated_;  // the pool's, by card
};

}  // namespace hetpool::daemon
