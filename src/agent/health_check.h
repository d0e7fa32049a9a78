// The node's own health check, as Slurm's HealthCheckProgram (NHC): `hetpool-agent --health-check
// PROGRAM --health-interval 5m` runs PROGRAM every interval, bounded by a timeout, on a thread
// of its own. A non-zero exit (or a run past the timeout) takes the node out of service: the
// agent reports it as its fault, with the program's last line as the reason, and the daemon
// places nothing there until a later run passes. The program is the operator's (a root-owned
// path given on the command line), never a job's.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
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

class HealthCheck {
 public:
  explicit HealthCheck(HealthCheckOptions options, MonotonicClock clock = MonotonicNow);
  ~HealthCheck();

  // Starts a run when the interval has passed since the last began and none is under way (the
  // first at once). Never waits for the program.
  void MaybeRun();
  // "" while the last run passed (or none has ended yet); else why the node is out of service.
  std::string Failure() const;
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
};

}  // namespace hetpool::agent
