// The agent's job sandbox: working directories inside the job roots (no '..' or symlink way out),
// the account processes run as, and the run-as map file.
#include <unistd.h>

#include <filesystem>
#include <fstream>

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
  options.run_as = "nobody";
  options.run_as_map = {{"alice", "daemon"}};
  // As root (uid 0 passed in): alice maps to daemon; others fall to --run-as, nobody here.
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

// Issue 14, item 7: by default every user gets a uid of their own, the same one each time.
TEST(JobSandbox, ByDefaultEachUserRunsAsAUidOfTheirOwn) {
  testing::TempDir dir;
  const std::string file = dir.path() + "/dynamic-users.json";
  auto users = DynamicUsers::Open(file);
  ASSERT_TRUE(users.ok()) << users.status();
  SandboxOptions options;  // run_as: dynamic
  options.dynamic_users = users->get();
  auto alice = ResolveRunAs("alice", options, 0);
  auto bob = ResolveRunAs("bob", options, 0);
  ASSERT_TRUE(alice.ok()) << alice.status();
  ASSERT_TRUE(bob.ok());
  EXPECT_TRUE(alice->switch_user);
  EXPECT_NE(alice->uid, bob->uid);
  EXPECT_GE(alice->uid, DynamicUsers::kDefaultMin);
  EXPECT_LE(alice->uid, DynamicUsers::kDefaultMax);
  EXPECT_EQ(alice->gid, alice->uid);
  EXPECT_TRUE(alice->groups.empty());
  EXPECT_EQ(alice->home, "");  // HOME becomes the run directory
  EXPECT_EQ(ResolveRunAs("alice", options, 0)->uid, alice->uid);
  // Kept on disk: a restarted agent gives alice the same uid and bob his.
  auto reopened = DynamicUsers::Open(file);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ(*(*reopened)->UidFor("bob"), bob->uid);
  EXPECT_EQ(*(*reopened)->UidFor("alice"), alice->uid);
  // A full range is an error that says so.
  auto tiny = DynamicUsers::Open(dir.path() + "/tiny.json", 64000, 64000);
  ASSERT_TRUE(tiny.ok());
  EXPECT_TRUE((*tiny)->UidFor("carol").ok());
  auto full = (*tiny)->UidFor("dave");
  EXPECT_TRUE(absl::IsResourceExhausted(full.status())) << full.status();
}

// Issue 60, item 4: two agents on one host each kept a table of their own starting at 61184;
// node-a gave bob 61184 and node-b gave alice 61184, and alice's job read bob's secrets. One
// table per host, under a lock: a user has one uid on the host, and no two users share one.
TEST(JobSandbox, TwoAgentsOfAHostShareOneUidTable) {
  testing::TempDir dir;
  const std::string host_table = dir.path() + "/host/dynamic-users.json";
  auto node_a = DynamicUsers::Open(host_table);
  auto node_b = DynamicUsers::Open(host_table);
  ASSERT_TRUE(node_a.ok() && node_b.ok());
  const auto bob = (*node_a)->UidFor("bob");
  const auto alice = (*node_b)->UidFor("alice");  // node-b had never heard of bob
  ASSERT_TRUE(bob.ok() && alice.ok()) << bob.status() << alice.status();
  EXPECT_NE(*alice, *bob) << "two users of one host share a uid";
  EXPECT_EQ(*(*node_b)->UidFor("bob"), *bob);
  EXPECT_EQ(*(*node_a)->UidFor("alice"), *alice);

  // Tables an older agent kept in its own work dir are merged: the first keeps its uids; where
  // the second's uid went to another user already, its user gets a new one.
  const std::string old_a = dir.path() + "/a.json", old_b = dir.path() + "/b.json";
  std::ofstream(old_a) << R"({"carol": 64000})";
  std::ofstream(old_b) << R"({"dave": 64000, "erin": 64001})";
  const std::string merged = dir.path() + "/merged/dynamic-users.json";
  ASSERT_TRUE(DynamicUsers::Open(merged, DynamicUsers::kDefaultMin, DynamicUsers::kDefaultMax, old_a).ok());
  auto both = DynamicUsers::Open(merged, DynamicUsers::kDefaultMin, DynamicUsers::kDefaultMax, old_b);
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(*(*both)->UidFor("carol"), 64000u);
  EXPECT_EQ(*(*both)->UidFor("erin"), 64001u);
  EXPECT_NE(*(*both)->UidFor("dave"), 64000u);
  EXPECT_TRUE(std::filesystem::exists(old_b + ".merged"));
  EXPECT_FALSE(std::filesystem::exists(old_b));
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

// Whether a job's account may write in its working dir, read from the directory's owner, group and
// other bits (no process is switched; the directory is made with each owner in turn).
TEST(JobSandbox, AWorkingDirTheAccountCannotWriteIsNamedWithTheAccount) {
  if (geteuid() != 0) GTEST_SKIP() << "chown needs root";
  testing::TempDir dir;
  const RunAs nobody{.switch_user = true, .uid = 65534, .gid = 65534, .groups = {}, .account = "nobody"};
  std::filesystem::permissions(dir.path(), std::filesystem::perms(0755));
  EXPECT_EQ(WorkingDirUnwritable(dir.path(), nobody),
            "working dir " + dir.path() + " is not writable by the job's account nobody (uid 65534)");
  EXPECT_EQ(WorkingDirUnwritable(dir.path(), RunAs{}), "");  // the agent's own account, root
  std::filesystem::permissions(dir.path(), std::filesystem::perms(0777));
  EXPECT_EQ(WorkingDirUnwritable(dir.path(), nobody), "");
  ASSERT_EQ(chown(dir.path().c_str(), 0, 4242), 0);
  std::filesystem::permissions(dir.path(), std::filesystem::perms(0775));
  RunAs in_group = nobody;
  in_group.groups = {4242};
  EXPECT_EQ(WorkingDirUnwritable(dir.path(), in_group), "");  // a supplementary group may write
  EXPECT_NE(WorkingDirUnwritable(dir.path(), nobody), "");
  ASSERT_EQ(chown(dir.path().c_str(), 65534, 4242), 0);
  std::filesystem::permissions(dir.path(), std::filesystem::perms(0575));
  EXPECT_NE(WorkingDirUnwritable(dir.path(), in_group), "");  // its owner's bits decide for the owner
}

}  // namespace
}  // namespace hetpool::agent
