// The agent's job sandbox: working directories inside the job roots (no '..' or symlink way out),
// the account processes run as, and the run-as map file.
#include <unistd.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "src/agent/job_sandbox.h"
#include "tests/testing/temp_dir.h"

namespace hetpool::agent {
namespace {

TEST(JobSandbox, WorkingDirsStayInsideTheRoots) {
  hetpool::testing::TempDir dir;
  const std::string root = dir.path() + "/jobs";
  std::filesystem::create_directories(root + "/team/run1");
  std::filesystem::create_directories(dir.path() + "/secret");
  std::filesystem::create_directories(dir.path() + "/jobs-evil");
  std::filesystem::create_directory_symlink(dir.path() + "/secret", root + "/team/escape");

  auto inside = ResolveWorkingDir(root + "/team/run1", {root});
  ASSERT_TRUE(inside.ok()) << inside.status();
  EXPECT_EQ(*inside, std::filesystem::canonical(root + "/team/run1").string());

  auto dotdot = ResolveWorkingDir(root + "/team/../../secret", {root});
  ASSERT_FALSE(dotdot.ok());
  EXPECT_TRUE(absl::StrContains(dotdot.status().message(), "outside this node's job directories")) << dotdot.status();

  auto symlink = ResolveWorkingDir(root + "/team/escape", {root});
  ASSERT_FALSE(symlink.ok());
  EXPECT_TRUE(absl::StrContains(symlink.status().message(), "(really ")) << symlink.status();

  // A sibling sharing the root's name as a prefix is not inside it.
  EXPECT_FALSE(ResolveWorkingDir(dir.path() + "/jobs-evil", {root}).ok());
  EXPECT_TRUE(ResolveWorkingDir(dir.path() + "/secret", {root, dir.path() + "/secret"}).ok());

  auto missing = ResolveWorkingDir(root + "/nope", {root});
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "cannot enter working_dir")) << missing.status();
}

TEST(JobSandbox, RootAgentsRunJobsAsMappedAccountsNeverRootByDefault) {
  SandboxOptions options;
  options.run_as_map = {{"alice", "daemon"}};
  // As root (uid 0 passed in): alice maps to daemon; others fall to the default, nobody.
  auto alice = ResolveRunAs("alice", options, 0);
  ASSERT_TRUE(alice.ok()) << alice.status();
  EXPECT_TRUE(alice->switch_user);
  EXPECT_EQ(alice->account, "daemon");
  EXPECT_NE(alice->uid, 0u);
  auto bob = ResolveRunAs("bob", options, 0);
  ASSERT_TRUE(bob.ok());
  EXPECT_EQ(bob->account, "nobody");
  EXPECT_NE(bob->uid, 0u);
  // "*" catches everyone the map does not name.
  options.run_as_map["*"] = "daemon";
  EXPECT_EQ(ResolveRunAs("bob", options, 0)->account, "daemon");
  // An account the node lacks refuses the launch, naming it.
  options.run_as_map["carol"] = "no-such-account-here";
  auto carol = ResolveRunAs("carol", options, 0);
  ASSERT_FALSE(carol.ok());
  EXPECT_TRUE(absl::StrContains(carol.status().message(), "'no-such-account-here'")) << carol.status();
  // root only when asked for.
  options.run_as_map.clear();
  options.run_as = "root";
  EXPECT_FALSE(ResolveRunAs("bob", options, 0)->switch_user);
  // A non-root agent cannot switch.
  EXPECT_FALSE(ResolveRunAs("alice", SandboxOptions{}, 1000)->switch_user);
}

TEST(JobSandbox, RunAsMapFile) {
  auto map = ParseRunAsMap(R"({"alice": "alice", "*": "hetpool-jobs"})");
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->at("*"), "hetpool-jobs");
  EXPECT_FALSE(ParseRunAsMap(R"({"alice": "-rf"})").ok());
  EXPECT_FALSE(ParseRunAsMap(R"({"alice": 3})").ok());
  EXPECT_FALSE(ParseRunAsMap(R"({"alice": "a b"})").ok());
  EXPECT_FALSE(ParseRunAsMap("[]").ok());
}

}  // namespace
}  // namespace hetpool::agent
