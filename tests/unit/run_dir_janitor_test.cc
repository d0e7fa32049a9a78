// The agent's work dir kept in bounds (issue 60, item 9): ended generations' run directories go
// after the retention, running ones over the limit are named, and neither walk follows a link a
// job planted.
#include "src/agent/run_dir_janitor.h"

#include <sys/stat.h>
#include <utime.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace hetpool::agent {
namespace {
namespace fs = std::filesystem;

void Write(const fs::path& path, size_t bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << std::string(bytes, 'x');
}

void SetTime(const fs::path& path, absl::Time when) {
  const struct utimbuf times = {absl::ToTimeT(when), absl::ToTimeT(when)};
  ::utime(path.c_str(), &times);
}

TEST(RunDirJanitor, RemovesEndedGenerationsAfterTheRetentionAndNamesRunningOnesOverTheLimit) {
  testing::TempDir work;
  const fs::path root = work.path();
  const absl::Time now = absl::Now();
  // g1 ended four days ago; g2 an hour ago; g3 runs and holds 3 MiB.
  Write(root / "jobs/job-000001/g1/checkpoint.pt", 1000);
  Write(root / "logs/job-000001/g1/node.log", 10);
  SetTime(root / "logs/job-000001/g1/node.log", now - absl::Hours(96));
  Write(root / "jobs/job-000001/g2/checkpoint.pt", 1000);
  Write(root / "logs/job-000001/g2/node.log", 10);
  SetTime(root / "logs/job-000001/g2/node.log", now - absl::Hours(1));
  Write(root / "jobs/job-000002/g3/big", 3 << 20);
  // A job's link out of its tree: neither followed nor what it points to removed.
  testing::TempDir outside;
  Write(fs::path(outside.path()) / "precious", 10);
  fs::create_directory_symlink(outside.path(), root / "jobs/job-000001/g1/escape");

  RunDirJanitor janitor({.work_dir = root.string(), .retention = absl::Hours(72), .job_disk_limit_mib = 2});
  const RunDirJanitor::Sweep sweep = janitor.Run({{"job-000002", 3}}, now);
  ASSERT_EQ(sweep.removed.size(), 1u);
  EXPECT_EQ(sweep.removed[0], (RunDirJanitor::Key{"job-000001", 1}));
  EXPECT_FALSE(fs::exists(root / "jobs/job-000001/g1"));
  EXPECT_FALSE(fs::exists(root / "logs/job-000001/g1"));
  EXPECT_TRUE(fs::exists(root / "jobs/job-000001/g2/checkpoint.pt"));  // within the retention
  EXPECT_TRUE(fs::exists(fs::path(outside.path()) / "precious")) << "the walk followed a job's link";
  ASSERT_EQ(sweep.over_limit.size(), 1u);
  EXPECT_EQ(sweep.over_limit[0].first, (RunDirJanitor::Key{"job-000002", 3}));
  EXPECT_TRUE(absl::StrContains(sweep.over_limit[0].second, "over this node's limit of")) << sweep.over_limit[0].second;
  EXPECT_TRUE(fs::exists(root / "jobs/job-000002/g3/big"));  // a running job's files stay

  // Later, g2 too; job-000001 then has nothing left and goes whole.
  const RunDirJanitor::Sweep later = janitor.Run({{"job-000002", 3}}, now + absl::Hours(72));
  EXPECT_EQ(later.removed.size(), 1u);
  EXPECT_FALSE(fs::exists(root / "jobs/job-000001"));
}

TEST(RunDirJanitor, RemoveTreeNoFollowRemovesLinksNotTheirTargets) {
  testing::TempDir dir;
  const fs::path tree = fs::path(dir.path()) / "tree";
  Write(tree / "a/b/c", 10);
  Write(fs::path(dir.path()) / "target/keep", 10);
  fs::create_symlink(fs::path(dir.path()) / "target", tree / "a/link");
  fs::create_symlink(fs::path(dir.path()) / "target/keep", tree / "file-link");
  ASSERT_TRUE(RemoveTreeNoFollow(tree.string()).ok());
  EXPECT_FALSE(fs::exists(tree));
  EXPECT_TRUE(fs::exists(fs::path(dir.path()) / "target/keep"));
  EXPECT_TRUE(RemoveTreeNoFollow(tree.string()).ok());  // nothing there: fine
  EXPECT_GE(DiskUsageNoFollow(dir.path()), 0u);
}

}  // namespace
}  // namespace hetpool::agent
