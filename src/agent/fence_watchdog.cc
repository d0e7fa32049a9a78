#include "src/agent/fence_watchdog.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <iterator>
#include <set>

#include "absl/strings/str_cat.h"
#include "src/agent/job_cgroup.h"

namespace hetpool::agent {
namespace {

enum Kind : int32_t { kRenew = 1, kWatch = 2, kForget = 3 };

// One message: smaller than PIPE_BUF, so every write is atomic and whole.
struct Message {
  int32_t kind;
  int64_t value;  // kRenew: deadline in monotonic ns; else a process group id
};

int64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// The watchdog process: no threads, no gRPC (a forked copy of the agent before any thread).
// Drops groups that no longer exist, so that a process group id the kernel hands out again
// later is never taken for one of ours.
void ForgetDeadGroups(std::set<pid_t>& groups) {
  for (auto it = groups.begin(); it != groups.end();) {
    it = killpg(*it, 0) != 0 && errno == ESRCH ? groups.erase(it) : std::next(it);
  }
}

// The watchdog process: no threads, no gRPC, a poll loop with a one-second tick.
[[noreturn]] void RunWatchdog(int fd) {
  // Signals the agent blocked for its sigwait stay blocked here: a SIGTERM to the agent does not
  // take the fence away. Only SIGKILL ends the watchdog early.
  prctl(PR_SET_NAME, "hetpool-fence");
  std::set<pid_t> groups;
  int64_t deadline = INT64_MAX;
  bool agent_alive = true;
  while (true) {
    ForgetDeadGroups(groups);
    const int64_t now = MonotonicNs();
    // Past the deadline, or the agent gone before it ever had one: nothing vouches for the jobs.
    if (now >= deadline || (!agent_alive && deadline == INT64_MAX)) {
      for (pid_t pgid : groups) {
        // First what the group's leader shares a job cgroup with (whatever left the group), while
        // the leader still shows which cgroup that is; then the group. No wait for the cgroup to
        // empty: every group is due now (the frozen agent's zombies would keep it listed).
        const bool in_cgroup =
            KillJobCgroupOf(pgid, absl::ZeroDuration()).status().code() != absl::StatusCode::kNotFound;
        killpg(pgid, SIGKILL);
        std::fprintf(stderr, "hetpool-fence: the agent did not renew its fence in time: killed process group %d%s\n",
                     static_cast<int>(pgid), in_cgroup ? " and everything in its job cgroup" : "");
      }
      groups.clear();
      deadline = INT64_MAX;
    }
    if (!agent_alive && groups.empty()) _exit(0);
    const int64_t wait_ms = deadline == INT64_MAX ? 1000 : std::min<int64_t>((deadline - now) / 1'000'000 + 1, 1000);
    if (!agent_alive) {
      timespec ts{0, static_cast<long>(wait_ms) * 1'000'000};
      if (wait_ms >= 1000) ts = {1, 0};
      nanosleep(&ts, nullptr);
      continue;
    }
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(wait_ms)) <= 0) continue;  // the tick, or EINTR
    Message m{};
    const ssize_t n = read(fd, &m, sizeof(m));
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
      agent_alive = false;  // the channel closed: the agent exited or was killed
      continue;
    }
    if (n != static_cast<ssize_t>(sizeof(m))) continue;
    switch (m.kind) {
      case kRenew: deadline = m.value; break;
      case kWatch: groups.insert(static_cast<pid_t>(m.value)); break;
      case kForget: groups.erase(static_cast<pid_t>(m.value)); break;
      default: break;
    }
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<FenceWatchdog>> FenceWatchdog::Start() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    return absl::InternalError(absl::StrCat("fence watchdog: pipe: ", std::strerror(errno)));
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return absl::InternalError(absl::StrCat("fence watchdog: fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    close(fds[1]);
    // Its own process group, so a signal to the agent's group (a terminal's ^C) reaches the agent
    // and not the fence.
    setpgid(0, 0);
    RunWatchdog(fds[0]);
  }
  close(fds[0]);
  return std::unique_ptr<FenceWatchdog>(new FenceWatchdog(fds[1], pid));
}

FenceWatchdog::~FenceWatchdog() { close(fd_); }

void FenceWatchdog::Send(int kind, int64_t value) {
  const Message m{kind, value};
  ssize_t n;
  do {
    n = write(fd_, &m, sizeof(m));
  } while (n < 0 && errno == EINTR);
}

void FenceWatchdog::RenewUntil(absl::Duration from_now) {
  Send(kRenew, from_now == absl::InfiniteDuration() ? INT64_MAX : MonotonicNs() + absl::ToInt64Nanoseconds(from_now));
}

void FenceWatchdog::Watch(pid_t pgid) { Send(kWatch, pgid); }

void FenceWatchdog::Forget(pid_t pgid) { Send(kForget, pgid); }

}  // namespace hetpool::agent
