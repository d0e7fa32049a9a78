// The agent's fence watchdog (issue 14, item 12): job process groups die at the deadline the agent
// stops renewing, whether the agent is cut off, frozen or gone, and live while it renews.
#include "src/agent/fence_watchdog.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/testing/eventually.h"

namespace hetpool::agent {
namespace {

// A process in a group of its own, as the runner starts jobs.
pid_t StartGroup() {
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    execl("/bin/sleep", "sleep", "60", nullptr);
    _exit(127);
  }
  setpgid(pid, pid);
  return pid;
}

// The signal that ended `pid`, once it has ended within `timeout`.
std::optional<int> WaitKilled(pid_t pid, absl::Duration timeout) {
  std::optional<int> signal;
  hetpool::testing::Eventually(
      [&] {
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) != pid) return false;
        signal = WIFSIGNALED(status) ? WTERMSIG(status) : -1;
        return true;
      },
      timeout, absl::Milliseconds(20));
  return signal;
}

TEST(FenceWatchdog, KillsWatchedGroupsWhenTheDeadlinePasses) {
  auto watchdog = FenceWatchdog::Start();
  ASSERT_TRUE(watchdog.ok()) << watchdog.status();
  const pid_t job = StartGroup();
  (*watchdog)->Watch(job);
  (*watchdog)->RenewUntil(absl::Milliseconds(300));
  EXPECT_EQ(WaitKilled(job, absl::Seconds(20)), SIGKILL);
}

TEST(FenceWatchdog, RenewedGroupsLiveAndForgottenOnesAreLeftAlone) {
  auto watchdog = FenceWatchdog::Start();
  ASSERT_TRUE(watchdog.ok());
  const pid_t renewed = StartGroup();
  const pid_t forgotten = StartGroup();
  (*watchdog)->Watch(renewed);
  (*watchdog)->Watch(forgotten);
  (*watchdog)->Forget(forgotten);
  // Renewed well before each deadline for a while: nothing dies.
  for (int i = 0; i < 10; ++i) {
    (*watchdog)->RenewUntil(absl::Seconds(3));  // slack for a loaded machine
    EXPECT_FALSE(WaitKilled(renewed, absl::Milliseconds(100)).has_value()) << i;
  }
  // Renewals stop: the watched group dies, the forgotten one does not.
  EXPECT_EQ(WaitKilled(renewed, absl::Seconds(20)), SIGKILL);
  EXPECT_FALSE(WaitKilled(forgotten, absl::Milliseconds(300)).has_value());
  kill(forgotten, SIGKILL);
  waitpid(forgotten, nullptr, 0);
}

TEST(FenceWatchdog, OutlivesItsAgentAndStillKillsAtTheDeadline) {
  auto watchdog = FenceWatchdog::Start();
  ASSERT_TRUE(watchdog.ok());
  const pid_t job = StartGroup();
  (*watchdog)->Watch(job);
  (*watchdog)->RenewUntil(absl::Seconds(3));
  const pid_t fence = (*watchdog)->pid();
  watchdog->reset();  // the agent's end of the channel closes, as when it dies
  EXPECT_FALSE(WaitKilled(job, absl::Milliseconds(500)).has_value()) << "killed before its deadline";
  EXPECT_EQ(WaitKilled(job, absl::Seconds(20)), SIGKILL);
  int status = 0;
  EXPECT_EQ(waitpid(fence, &status, 0), fence);  // and then exits, nothing left to guard
}

}  // namespace
}  // namespace hetpool::agent
