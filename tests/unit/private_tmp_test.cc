// A job's private /tmp (src/agent/private_tmp), in a real mount namespace: the host's /tmp is
// out of view but for the paths kept, and what the job writes there never reaches the host.
// Skipped, saying so, where the test cannot make mount namespaces (not root).
#include "src/agent/private_tmp.h"

#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace hetpool::agent {
namespace {
namespace fs = std::filesystem;

TEST(PrivateTmp, KeepsOnlyPathsUnderTmpThatExistOutermostFirst) {
  const fs::path base = absl::StrCat("/tmp/hetpool-private-tmp-plan-", getpid());
  fs::create_directories(base / "inner");
  PrivateTmp plan({base.string(), (base / "inner").string(), "/usr", "/tmp", (base / "missing").string()});
  EXPECT_EQ(plan.kept(), std::vector<std::string>{base.string()});
  EXPECT_TRUE(UnderTmp("/tmp/x"));
  EXPECT_FALSE(UnderTmp("/tmpfoo"));
  fs::remove_all(base);
}

TEST(PrivateTmp, AJobSeesItsOwnTmpAndWhatItKeepsAndLeavesNothingOnTheHost) {
  if (geteuid() != 0) GTEST_SKIP() << "not root: no mount namespace can be made";
  const fs::path kept = absl::StrCat("/tmp/hetpool-private-tmp-kept-", getpid());
  const fs::path hidden = absl::StrCat("/tmp/hetpool-private-tmp-hidden-", getpid());
  const fs::path written = absl::StrCat("/tmp/hetpool-private-tmp-written-", getpid());
  fs::create_directories(kept);
  std::ofstream(kept / "data") << "kept";
  std::ofstream(hidden) << "host";
  PrivateTmp plan({kept.string()});
  const pid_t child = fork();
  if (child == 0) {
    if (plan.EnterInChild() != 0) _exit(10);
    if (fs::exists(hidden)) _exit(11);          // the host's /tmp is out of view
    if (!fs::exists(kept / "data")) _exit(12);  // ... but for what was kept
    std::ofstream(written) << "job";
    if (!fs::exists(written)) _exit(13);            // its own /tmp is writable
    std::ofstream(kept / "from-job") << "through";  // the kept dir is the host's own
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_FALSE(fs::exists(written));
  EXPECT_TRUE(fs::exists(kept / "from-job"));
  fs::remove_all(kept);
  fs::remove(hidden);
}

// Issue 60, item 5: /dev/shm was the host's, shared by every job and outliving them all (a file
// bob's job wrote there was readable by alice's and stayed in RAM). A job's /dev/shm is its own,
// sized by its memory limit, and gone with it.
TEST(PrivateTmp, AJobHasADevShmOfItsOwnSizedByItsMemory) {
  if (geteuid() != 0) GTEST_SKIP() << "not root: no mount namespace can be made";
  if (!fs::is_directory("/dev/shm")) GTEST_SKIP() << "this host has no /dev/shm";
  const fs::path host_file = absl::StrCat("/dev/shm/hetpool-shm-host-", getpid());
  const fs::path job_file = absl::StrCat("/dev/shm/hetpool-shm-job-", getpid());
  std::ofstream(host_file) << "another job's secret";
  PrivateTmp plan({}, /*private_shm=*/true, /*shm_mib=*/64);
  const pid_t child = fork();
  if (child == 0) {
    if (plan.EnterInChild() != 0) _exit(10);
    if (fs::exists(host_file)) _exit(11);  // the host's /dev/shm is out of view
    std::ofstream(job_file) << "mine";
    if (!fs::exists(job_file)) _exit(12);  // its own is writable
    struct statvfs shm {};
    if (statvfs("/dev/shm", &shm) != 0) _exit(13);
    if (shm.f_blocks * shm.f_frsize != 64ull << 20) _exit(14);  // sized by its memory
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_FALSE(fs::exists(job_file)) << "what the job wrote in /dev/shm outlived it on the host";

  // A job on an MPS-shared card keeps the host's: its MPS server's shared memory is there.
  PrivateTmp shared({}, /*private_shm=*/false);
  const pid_t mps = fork();
  if (mps == 0) _exit(shared.EnterInChild() == 0 && fs::exists(host_file) ? 0 : 10);
  ASSERT_EQ(waitpid(mps, &status, 0), mps);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  fs::remove(host_file);
}

}  // namespace
}  // namespace hetpool::agent
