// A job's private /tmp (src/agent/private_tmp), in a real mount namespace: the host's /tmp is
// out of view but for the paths kept, and what the job writes there never reaches the host.
// Skipped, saying so, where the test cannot make mount namespaces (not root).
#include "src/agent/private_tmp.h"

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
    if (fs::exists(hidden)) _exit(11);               // the host's /tmp is out of view
    if (!fs::exists(kept / "data")) _exit(12);        // ... but for what was kept
    std::ofstream(written) << "job";
    if (!fs::exists(written)) _exit(13);              // its own /tmp is writable
    std::ofstream(kept / "from-job") << "through";    // the kept dir is the host's own
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

}  // namespace
}  // namespace hetpool::agent
