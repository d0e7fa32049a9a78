// The agent's process ledger (issue 45, item 1): a write that fails keeps the previous ledger,
// and a successor finds what its predecessor started even without a ledger.
#include "src/agent/process_ledger.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "src/common/durable_file.h"
#include "tests/testing/read_file.h"
#include "tests/testing/small_filesystem.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/eventually.h"

namespace hetpool::agent {
namespace {

using ::hetpool::testing::ReadAll;
using ::hetpool::testing::SmallFilesystem;
using ::hetpool::testing::TempDir;

// A `sleep 600` in its own process group, with `env` as its whole environment.
pid_t SpawnSleeper(const std::vector<std::string>& env = {}) {
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    std::vector<char*> envp;
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    char sleep[] = "/bin/sleep";
    char seconds[] = "600";
    char* argv[] = {sleep, seconds, nullptr};
    execve(argv[0], argv, envp.data());
    _exit(127);
  }
  setpgid(pid, pid);
  return pid;
}

// The signal that ended `pid` (0 when it is still running after `patience`, or exited).
int WaitSignal(pid_t pid, absl::Duration patience = absl::Seconds(10)) {
  int signal = 0;
  hetpool::testing::Eventually(
      [&] {
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) != pid) return false;
        signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        return true;
      },
      patience, absl::Milliseconds(20));
  return signal;
}

void KillAndReap(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

TEST(DurableFile, ReplacesTheFileWholeAndKeepsItWhenTheWriteFails) {
  TempDir dir;
  const std::string path = dir.path() + "/table";
  ASSERT_TRUE(ReplaceFileDurably(path, "first\n").ok());
  EXPECT_EQ(ReadAll(path), "first\n");
  ASSERT_TRUE(ReplaceFileDurably(path, "second\n").ok());
  EXPECT_EQ(ReadAll(path), "second\n");
  // The temporary file cannot be made (a directory is in its way): the old contents stay.
  std::filesystem::create_directory(path + ".tmp");
  const absl::Status refused = ReplaceFileDurably(path, "third\n");
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find(path), std::string::npos) << refused;
  EXPECT_EQ(ReadAll(path), "second\n");
}

// The defect: with the work dir full, the ledger was replaced by an empty file without a word,
// and a restarted agent then stopped nothing while the daemon started a second generation.
TEST(ProcessLedger, AWriteToAFullDiskKeepsThePreviousLedgerAndSaysSo) {
  TempDir dir;
  auto fs = SmallFilesystem::Mount(dir.path() + "/work", 256 * 1024);
  if (!fs.ok()) GTEST_SKIP() << "needs a real full filesystem: " << fs.status();
  const std::string path = (*fs)->dir() + "/process-groups";
  const pid_t first = SpawnSleeper();
  const pid_t second = SpawnSleeper();
  {
    ProcessLedger ledger(path, "");
    ASSERT_TRUE(ledger.Add(first, "job-000001", 1).ok());
    const std::string before = ReadAll(path);
    ASSERT_NE(before.find("job-000001"), std::string::npos);

    ASSERT_TRUE((*fs)->Fill().ok());
    const absl::Status refused = ledger.Add(second, "job-000002", 1);
    ASSERT_FALSE(refused.ok()) << "a ledger write to a full disk was taken";
    EXPECT_NE(refused.message().find("No space left on device"), std::string::npos) << refused;
    EXPECT_FALSE(ledger.last_write().ok());
    EXPECT_EQ(ReadAll(path), before) << "the failed write changed the ledger";
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

    (*fs)->Free();
    EXPECT_TRUE(ledger.Rewrite().ok());
    EXPECT_TRUE(ledger.last_write().ok());
  }
  // The agent is gone (kill -9): its successor stops what the ledger names.
  ProcessLedger successor(path, "");
  EXPECT_EQ(successor.StopLeftovers(absl::Seconds(1)), 1);
  EXPECT_EQ(WaitSignal(first), SIGTERM);
  EXPECT_EQ(ReadAll(path), "");
  KillAndReap(second);  // never recorded: the runner would not have let it run
}

TEST(ProcessLedger, ASuccessorStopsItsPredecessorsProcessesWithoutTheLedger) {
  TempDir dir;
  const std::string work = dir.path() + "/work";
  std::filesystem::create_directories(work);
  const pid_t ours = SpawnSleeper({std::string(kAgentMarkerVariable) + "=" + work, "PATH=/bin"});
  // Another agent's job on the same host (its own work dir): not this agent's to stop.
  const pid_t theirs = SpawnSleeper({std::string(kAgentMarkerVariable) + "=" + work + "-other", "PATH=/bin"});
  ASSERT_GT(ours, 0);
  // The environment is readable once the child has exec'd.
  hetpool::testing::Eventually(
      [&] {
        return ReadAll("/proc/" + std::to_string(ours) + "/environ").find(kAgentMarkerVariable) != std::string::npos;
      },
      absl::Seconds(5), absl::Milliseconds(10));
  ProcessLedger successor(work + "/process-groups", work);  // no ledger file at all
  EXPECT_EQ(successor.StopLeftovers(absl::Seconds(1)), 1);
  EXPECT_EQ(WaitSignal(ours), SIGTERM);
  int status = 0;
  EXPECT_EQ(waitpid(theirs, &status, WNOHANG), 0) << "another agent's job process was stopped";
  KillAndReap(theirs);
}

}  // namespace
}  // namespace hetpool::agent
