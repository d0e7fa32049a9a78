// The node's own health check, as Slurm's HealthCheckProgram (NHC): `hetpool-agent --health-check
// PROGRAM --health-interval 5m` runs PROGRAM every interval, bounded by a timeout, on a thread
// of its own. A non-zero exit (or a run past the timeout) takes the node out of service: the
// agent reports it as its fault, with the program's last line as the reason, and the daemon
// places nothing there until a later run passes. A failing run whose last line starts with some of
// the node's cards ("nvidia2: retired pages pending", "nvidia0,nvidia3: ...") blames those cards
// alone: each gets a fatal signal (quarantined at once, as a vendor's would be) and the node stays
// in service. The program is the operator's (a root-owned path given on the command line), never
// a job's.
#pragma once

#include <atomic>
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
};

// One run of `program`: its exit status (-1: could not start or timed out) and its last line of
// output (stdout and stderr together).
struct HealthCheckRun {
  int exit_code = 0;
  std::string last_line;
};
HealthCheckRun RunHealthCheck(const std::string& program, absl::Duration timeout);

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

 private:
  const HealthCheckOptions options_;
  MonotonicClock clock_;
  absl::Time next_run_ = absl::InfinitePast();
  std::thread worker_;
  std::atomic<bool> running_{false};
  std::atomic<int> runs_{0};
  mutable absl::Mutex mu_;
  std::string failure_ ABSL_GUARDED_BY(mu_);
  std::string failed_line_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hetpool::agent
