// The fence that holds when the agent cannot: a small process forked at agent start, before any
// thread, that knows every job process group and a deadline the agent renews each time a daemon
// answers. Past the deadline it kills every group it knows (and, with confinement, everything in
// each group leader's job cgroup: what left the group too), whether the agent is cut off,
// frozen (SIGSTOP, a stuck syscall) or dead (SIGKILL): the daemon gives a lost node's jobs to
// other nodes only after that same deadline has passed (its lease plus the orphan grace), so
// two generations of a job never run at once. Like Slurm's slurmstepd, it outlives its parent.
#pragma once

#include <sys/types.h>

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hetpool::agent {

class FenceWatchdog {
 public:
  // Forks the watchdog. Call before any thread exists (fork copies only the calling thread).
  static absl::StatusOr<std::unique_ptr<FenceWatchdog>> Start();
  // Closes the channel: with no groups left the watchdog exits at once; with some, it keeps the
  // deadline and kills them then (an agent that died left them behind).
  ~FenceWatchdog();
  FenceWatchdog(const FenceWatchdog&) = delete;
  FenceWatchdog& operator=(const FenceWatchdog&) = delete;

  // The groups live until `deadline` (from now on the system's monotonic clock) unless renewed.
  // Before the first renewal there is no deadline.
  void RenewUntil(absl::Duration from_now);
  void Watch(pid_t pgid);
  void Forget(pid_t pgid);

  pid_t pid() const { return pid_; }

 private:
  FenceWatchdog(int fd, pid_t pid) : fd_(fd), pid_(pid) {}
  void Send(int kind, int64_t value);

  int fd_;
  pid_t pid_;
};

}  // namespace hetpool::agent
