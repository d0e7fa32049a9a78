// The node's own health check, as Slurm's HealthCheckProgram (NHC): `hetpool-agent --health-check
// PROGRAM --health-interval 5m` runs PROGRAM every interval, bounded by a timeout, on a thread
// of its own. A non-zero exit (or a run past the timeout) takes the node out of service: the
// agent reports it as its fault, with the program's last line as the reason, and the daemon
// places nothing there until a later run passes. A failing run whose last line starts with some of
// the node's cards ("nvidia2: retired pages pending", "nvidia0,nvidia3: ...") blames those cards
// alone: each gets a fatal signal (quarantined at once, as a vendor's would be) and the node stays
// in service. The program is the operator's (a root-owned path given on the command line), never
// a job's.
//
// With --preflight the same program also runs before each job's first launch on the node (as
// NVSentinel's pre-flight checks): the launch waits until a run that began after the launch was
// ordered has ended. A pass lets it start (its events say so); a failure refuses it as the node's
// fault (the daemon requeues the job elsewhere without spending a restart) and takes the node, or
// the cards its line names, out of service as a periodic failure would. One run serves every
// launch that was waiting when it began.
#pragma once

#include <atomic>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "hetpool/device.h"
#include "src/common/monotonic_clock.h"

namespace hetpool::agent {

struct HealthCheckOptions {
  std::string program;  // absolute path; "" = no health check
  absl::Duration interval = absl::Minutes(5);
  absl::Duration timeout = absl::Minutes(1);
  bool preflight = false;  // run it before each job's first launch here too
};

// What a pre-flight check says of one job's launch.
struct PreflightVerdict {
  enum class State { kNotAsked, kRunning, kPassed, kFailed };
  State state = State::kNotAsked;
  // kRunning: "pre-flight health check running"; kPassed: "pre-flight health check passed in
  // 0.4s"; kFailed: the failure, with the program's last line.
  std::string words;
};

// One run of `program`: its exit status (-1: could not start or timed out) and its last line of
// output (stdout and stderr together). It runs with the agent's environment and
// HETPOOL_HEALTH_CHECK=`occasion` (interval or preflight).
struct HealthCheckRun {
  int exit_code = 0;
  std::string last_line;
};
HealthCheckRun RunHealthCheck(const std::string& program, absl::Duration timeout,
                              const std::string& occasion = "interval");

// The cards of `device_ids` a failing run's last line names before its first ':' (separated by
// commas or spaces); empty when it names none, or anything that is not one of them (then the line
// is about the node).
std::vector<std::string> CardsNamedBy(const std::string& last_line, const std::vector<std::string>& device_ids);

class HealthCheck {
 public:
  explicit HealthCheck(HealthCheckOptions options, MonotonicClock clock = MonotonicNow);
  ~HealthCheck();

  // Starts a run when the interval has passed since the last began and none is under way (the
  // first at once). Never waits for the program.
  void MaybeRun();
  // "" while the last run passed (or none has ended yet); else why the node is out of service.
  std::string Failure() const;
  // Why the node is out of service: Failure(), unless its line names cards of `device_ids`
  // (then those cards are blamed, not the node).
  std::string NodeFailure(const std::vector<std::string>& device_ids) const;
  // Gives each card of `devices` a failing run names a fatal signal, its words the line.
  void BlameNamedCards(std::vector<DeviceRecord>& devices) const;
  // Whether any run has ended (for tests and the first report).
  bool ran() const { return runs_.load() > 0; }
  // True once after a run's verdict differs from the last (the named cards' signals change: the
  // agent discovers again at once instead of at its next refresh).
  bool TakeVerdictChanged() { return verdict_changed_.exchange(false); }

  // The pre-flight verdict for `job_id`'s launch on cards `device_ids` (kNotAsked unless
  // --preflight). A job that passed once here is not checked again (its later generations). A
  // failing run whose line names cards of `node_devices` fails only the jobs placed on them. Starts a
  // run when none that began after the job first asked is under way; never waits for it.
  PreflightVerdict Preflight(const std::string& job_id, const std::vector<std::string>& job_devices,
                             const std::vector<std::string>& node_devices);

 private:
  void StartRun(const std::string& occasion);

  const HealthCheckOptions options_;
  MonotonicClock clock_;
  absl::Time next_run_ = absl::InfinitePast();
  // Pre-flight (session thread only): when each waiting job first asked, and the jobs that passed
  // (past a bound the smallest ids, the oldest jobs, are forgotten: checked again if they return).
  std::map<std::string, absl::Time> preflight_asked_;
  std::set<std::string> preflight_passed_;
  std::thread worker_;
  std::atomic<bool> running_{false};
  std::atomic<int> runs_{0};
  std::atomic<bool> verdict_changed_{false};
  mutable absl::Mutex mu_;
  std::string failure_ ABSL_GUARDED_BY(mu_);
  std::string failed_line_ ABSL_GUARDED_BY(mu_);
  // The last run that ended: when it began and how long it took.
  absl::Time last_began_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Duration last_took_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hetpool::agent
