#include "src/agent/child_exit_watch.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>

#include "gtest/gtest.h"
#include "tests/testing/eventually.h"

namespace hetpool::agent {
namespace {

// A child's end wakes the watcher's caller at once, without reaping it (the runner does); a
// watch made while SIGCHLD is not blocked watches nothing.
TEST(ChildExitWatch, AChildsEndWakesTheLoop) {
  std::atomic<int> wakes{0};
  {
    const ChildExitWatch unblocked([&] { ++wakes; });
    const pid_t pid = fork();
    if (pid == 0) _exit(0);
    ASSERT_EQ(waitpid(pid, nullptr, 0), pid);
  }
  EXPECT_EQ(wakes.load(), 0);

  sigset_t before;
  pthread_sigmask(SIG_BLOCK, nullptr, &before);
  BlockChildSignals();
  {
    const ChildExitWatch watch([&] { ++wakes; });
    const pid_t pid = fork();
    if (pid == 0) _exit(0);
    EXPECT_TRUE(testing::Eventually([&] { return wakes.load() > 0; }, absl::Seconds(10)));
    int status = -1;
    EXPECT_EQ(waitpid(pid, &status, WNOHANG), pid);  // still there to reap
  }
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

}  // namespace
}  // namespace hetpool::agent
