// The job cgroups (src/agent/job_cgroup): v2 driven against a directory shaped like cgroupfs,
// v1 and v2 against this machine's real hierarchies (skipped, saying so, where none is
// writable): escapes by setsid, double fork and ignored SIGTERM are killed, the memory limit
// is the kernel's, a denied device file cannot be opened.
#include "src/agent/job_cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "src/common/cpu_list.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/eventually.h"

namespace hetpool::agent {
namespace {
namespace fs = std::filesystem;

std::string Read(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(text.str()));
}

void Write(const fs::path& file, const std::string& text) { std::ofstream(file) << text; }

using ::hetpool::testing::TempDir;

TEST(CpuList, ParsesAndFormatsSysfsLists) {
  EXPECT_EQ(ParseCpuList("0-3,8,10-11\n"), (std::set<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(ParseCpuList("x,5-2,7"), (std::set<int>{7}));  // what does not parse is left out
  EXPECT_EQ(FormatCpuList({}), "");
}

TEST(CgroupMounts, FindsTheUnifiedTreeAndEachV1Controller) {
  const CgroupMounts m = ParseCgroupMounts(
      "proc /proc proc rw 0 0\n"
      "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,nosuid,cpu,cpuacct 0 0\n"
      "cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n"
      "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,nsdelegate 0 0\n");
  EXPECT_EQ(m.v2, "/sys/fs/cgroup/unified");
  EXPECT_EQ(m.v1.at("cpu"), "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_EQ(m.v1.at("memory"), "/sys/fs/cgroup/memory");
  EXPECT_FALSE(m.v1.contains("freezer"));
  EXPECT_EQ(ParseConfineMode("sometimes").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Confinement, RefusesSayingWhatIsMissing) {
  TempDir dir;
  Write(fs::path(dir.path()) / "mounts", "cgroup /x cgroup rw,cpu 0 0\n");
  ConfinementOptions options;
  options.mounts_file = (fs::path(dir.path()) / "mounts").string();
  options.agent_name = "node-a";
  auto opened = Confinement::Open(options);
  ASSERT_FALSE(opened.ok());
  EXPECT_NE(opened.status().message().find("no cgroup2 filesystem mounted"), std::string::npos) << opened.status();
  EXPECT_NE(opened.status().message().find("no memory, pids, freezer controller"), std::string::npos)
      << opened.status();
}

// cgroup v2 as the agent drives it: what it writes where, read back from a cgroupfs-shaped tree.
TEST(CgroupV2, WritesTheLimitsAndEnablesTheControllersOnTheWayDown) {
  TempDir root;
  Write(fs::path(root.path()) / "cgroup.controllers", "cpuset cpu io memory hugetlb pids");
  ConfinementOptions options;
  options.agent_name = "node-a-0000abcd";
  options.jobs_memory_mib = 4096;
  auto confinement = OpenCgroupV2(fs::path(root.path()).string(), options);
  ASSERT_TRUE(confinement.ok()) << confinement.status();
  const fs::path parent = fs::path(root.path()) / "hetpool" / "node-a-0000abcd";
  for (const fs::path& level : {fs::path(root.path()), fs::path(root.path()) / "hetpool", parent}) {
    EXPECT_EQ(Read(level / "cgroup.subtree_control"), "+cpu +cpuset +memory +pids") << level;
  }
  EXPECT_EQ(Read(parent / "memory.max"), absl::StrCat(4096ull << 20));

  JobLimits limits;
  limits.memory_mib = 512;
  limits.memory_asked = true;
  limits.cpu_milli = 1500;
  limits.pids = 100;
  limits.cpus = "0-1";
  limits.mems = "0";
  auto job = (*confinement)->Create("job-000001-g1", limits);
  ASSERT_TRUE(job.ok()) << job.status();
  const fs::path dir = parent / "job-000001-g1";
  EXPECT_EQ(Read(dir / "memory.max"), "536870912");
  EXPECT_EQ(Read(dir / "cpu.max"), "150000 100000");
  EXPECT_EQ(Read(dir / "pids.max"), "100");
  EXPECT_EQ(Read(dir / "cpuset.cpus"), "0-1");
  EXPECT_EQ(Read(dir / "cpuset.mems"), "0");
  EXPECT_EQ((*job)->description(), "memory 512 MiB, cpu 1500m, cores 0-1, pids 100");

  ASSERT_TRUE((*job)->Add(4242).ok());
  EXPECT_EQ((*job)->Processes(), std::vector<pid_t>{4242});
  Write(dir / "memory.events", "low 0\nhigh 0\nmax 7\noom 2\noom_kill 2\n");
  EXPECT_EQ((*job)->OomKills(), 2);

  // cgroup.kill: written once; the kernel empties cgroup.procs (here: the test does).
  Write(dir / "cgroup.kill", "");
  Write(dir / "cgroup.procs", "");
  auto killed = (*job)->KillAll(absl::Seconds(1));
  ASSERT_TRUE(killed.ok()) << killed.status();
  EXPECT_EQ(Read(dir / "cgroup.kill"), "1");
}

// Without cgroup.kill (before Linux 5.14) the listed processes are killed one by one, frozen;
// a cgroup that will not empty is said, not waited on forever.
TEST(CgroupV2, WithoutCgroupKillKillsWhatIsListedAndSaysWhatIsLeft) {
  TempDir root;
  Write(fs::path(root.path()) / "cgroup.controllers", "memory pids");
  ConfinementOptions options;
  options.agent_name = "node-a";
  auto confinement = OpenCgroupV2(fs::path(root.path()).string(), options);
  ASSERT_TRUE(confinement.ok()) << confinement.status();
  auto job = (*confinement)->Create("job-000002-g1", {});
  ASSERT_TRUE(job.ok()) << job.status();
  const pid_t sleeper = fork();
  if (sleeper == 0) {
    execl("/bin/sleep", "sleep", "60", nullptr);
    _exit(127);
  }
  ASSERT_TRUE((*job)->Add(sleeper).ok());
  auto killed = (*job)->KillAll(absl::Milliseconds(200));  // the file still lists it: no kernel here
  EXPECT_EQ(killed.status().code(), absl::StatusCode::kDeadlineExceeded) << killed.status();
  int status = 0;
  ASSERT_EQ(waitpid(sleeper, &status, 0), sleeper);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_EQ(Read(fs::path(root.path()) / "hetpool" / "node-a" / "job-000002-g1" / "cgroup.freeze"),
            "0");  // thawed again
}

// ---- the real hierarchies ----

// A child that waits for the word, then runs `script` under sh: the test puts it in the cgroup
// first, as the runner does.
struct Waiting {
  pid_t pid = -1;
  int go = -1;
  void Release() {
    const char byte = 1;
    EXPECT_EQ(write(go, &byte, 1), 1);
    close(go);
  }
};
Waiting StartWaiting(const std::string& script) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[1]);
    char byte;
    if (read(fds[0], &byte, 1) != 1) _exit(126);
    setpgid(0, 0);
    execl("/bin/sh", "sh", "-c", script.c_str(), nullptr);
    _exit(127);
  }
  close(fds[0]);
  return {pid, fds[1]};
}
bool Alive(pid_t pid) {
  return kill(pid, 0) == 0 && Read(absl::StrCat("/proc/", pid, "/stat")).find(") Z ") == std::string::npos;
}
int Reap(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

// The three escapes the issue names, each leaving a sleep behind after the script exits 0.
constexpr const char* kEscapes =
    "setsid sleep 600 & ( ( sleep 600 & ) & ) ; setsid sh -c 'trap \"\" TERM; exec sleep 600' & "
    "sleep 0.2; exit 0";

std::unique_ptr<Confinement> OpenReal(CgroupVersion version, const std::string& why_skip_prefix, std::string* skip) {
  if (geteuid() != 0) {
    *skip = why_skip_prefix + ": not root, no cgroup is writable";
    return nullptr;
  }
  ConfinementOptions options;
  options.agent_name = absl::StrCat("unit-test-", getpid());
  options.version = version;
  auto opened = Confinement::Open(options);
  if (!opened.ok()) {
    *skip = absl::StrCat(why_skip_prefix, ": ", opened.status().message());
    return nullptr;
  }
  return *std::move(opened);
}

void ExpectEscapesKilled(Confinement& confinement) {
  auto job = confinement.Create("escapes-g1", {});
  ASSERT_TRUE(job.ok()) << job.status();
  Waiting child = StartWaiting(kEscapes);
  ASSERT_TRUE((*job)->Add(child.pid).ok());
  child.Release();
  const int status = Reap(child.pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  // The script is gone; what it left is still in the cgroup (the double fork's shell may still
  // be on its way out: wait for the three sleeps).
  hetpool::testing::Eventually([&] { return (*job)->Processes().size() >= 3; }, absl::Seconds(10),
                               absl::Milliseconds(20));
  const std::vector<pid_t> left = (*job)->Processes();
  ASSERT_GE(left.size(), 3u);
  auto killed = (*job)->KillAll(absl::Seconds(10));
  ASSERT_TRUE(killed.ok()) << killed.status();
  EXPECT_GE(*killed, 3);
  EXPECT_TRUE((*job)->Processes().empty());
  for (pid_t pid : left) EXPECT_FALSE(Alive(pid)) << pid;
  EXPECT_TRUE((*job)->Remove().ok());
}

// What the fence watchdog does, knowing only a group leader's pid: everything in the leader's
// job cgroup is killed, the escapes too.
void ExpectTheLeadersCgroupKilled(Confinement& confinement) {
  auto job = confinement.Create("fenced-g1", {});
  ASSERT_TRUE(job.ok()) << job.status();
  Waiting child = StartWaiting("setsid sleep 600 & ( ( sleep 600 & ) & ) ; exec sleep 600");
  ASSERT_TRUE((*job)->Add(child.pid).ok());
  child.Release();
  hetpool::testing::Eventually([&] { return (*job)->Processes().size() >= 3; }, absl::Seconds(10),
                               absl::Milliseconds(20));
  ASSERT_GE((*job)->Processes().size(), 3u);
  auto killed = KillJobCgroupOf(child.pid, absl::Seconds(10));
  ASSERT_TRUE(killed.ok()) << killed.status();
  EXPECT_GE(*killed, 3);
  EXPECT_TRUE((*job)->Processes().empty());
  Reap(child.pid);
  EXPECT_EQ(KillJobCgroupOf(getpid(), absl::Seconds(1)).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE((*job)->Remove().ok());
}

// Runs `check` on this machine's cgroups of `version`, then closes them; skips, saying why,
// where none is writable.
void OnRealCgroups(CgroupVersion version, const std::function<void(Confinement&)>& check) {
  std::string skip;
  auto confinement = OpenReal(
      version, version == CgroupVersion::kV1 ? "no writable cgroup v1 here" : "no writable cgroup v2 here", &skip);
  if (!confinement) GTEST_SKIP() << skip;
  check(*confinement);
  EXPECT_TRUE(confinement->Close().ok());
}

// A container runtime puts its processes in cgroups of its own below the job's (podman's
// libpod-<id> and conmon, --cgroup-parent): they are the job's all the same, killed with it, and
// their cgroups removed with its.
void ExpectCgroupsBelowTheJobsCounted(Confinement& confinement) {
  auto job = confinement.Create("runtime-g1", {});
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_FALSE((*job)->path().empty());
  EXPECT_TRUE(absl::EndsWith((*job)->path(), "/runtime-g1")) << (*job)->path();
  // Where this version mounts the hierarchy the path is relative to.
  std::vector<fs::path> dirs;
  if (confinement.version() == CgroupVersion::kV1) {
    for (const char* c : {"freezer", "memory", "pids"}) dirs.push_back(fs::path("/sys/fs/cgroup") / c);
  } else {
    std::ifstream mounts("/proc/self/mounts");
    std::string dev, where, type;
    while (mounts >> dev >> where >> type) {
      if (type == "cgroup2") dirs.push_back(where);
      mounts.ignore(1 << 16, '\n');
    }
  }
  std::vector<fs::path> below;
  for (const fs::path& root : dirs) {
    const fs::path dir = root / (*job)->path().substr(1) / "libpod-test";
    if (!fs::is_directory(dir.parent_path())) continue;
    ASSERT_TRUE(fs::create_directory(dir)) << dir;
    below.push_back(dir);
  }
  ASSERT_FALSE(below.empty());
  Waiting child = StartWaiting("exec sleep 600");
  for (const fs::path& dir : below) Write(dir / "cgroup.procs", absl::StrCat(child.pid));
  child.Release();
  const std::vector<pid_t> members = (*job)->Processes();
  EXPECT_EQ(members, std::vector<pid_t>{child.pid});
  auto killed = (*job)->KillAll(absl::Seconds(10));
  ASSERT_TRUE(killed.ok()) << killed.status();
  EXPECT_EQ(*killed, 1);
  Reap(child.pid);
  EXPECT_TRUE((*job)->Remove().ok());
  for (const fs::path& dir : below) EXPECT_FALSE(fs::exists(dir)) << dir;
}

TEST(CgroupV1Real, ARuntimesCgroupsBelowTheJobsAreTheJobs) {
  OnRealCgroups(CgroupVersion::kV1, ExpectCgroupsBelowTheJobsCounted);
}

TEST(CgroupV2Real, ARuntimesCgroupsBelowTheJobsAreTheJobs) {
  OnRealCgroups(CgroupVersion::kV2, ExpectCgroupsBelowTheJobsCounted);
}

TEST(CgroupV1Real, TheFenceKillsTheGroupLeadersWholeCgroup) {
  OnRealCgroups(CgroupVersion::kV1, ExpectTheLeadersCgroupKilled);
}

TEST(CgroupV2Real, TheFenceKillsTheGroupLeadersWholeCgroup) {
  OnRealCgroups(CgroupVersion::kV2, ExpectTheLeadersCgroupKilled);
}

TEST(CgroupV1Real, KillsWhatEscapedTheProcessGroup) {
  OnRealCgroups(CgroupVersion::kV1, [](Confinement& confinement) {
    ExpectEscapesKilled(confinement);
    EXPECT_EQ(confinement.StopLeftovers(), 0);
  });
}

TEST(CgroupV2Real, KillsWhatEscapedTheProcessGroup) { OnRealCgroups(CgroupVersion::kV2, ExpectEscapesKilled); }

// The limit is the kernel's: 200 MiB against 64 MiB is killed by the OOM killer, and it says so.
TEST(CgroupV1Real, AJobOverItsMemoryIsKilledAndTheOomKillIsCounted) {
  std::string skip;
  auto confinement = OpenReal(CgroupVersion::kV1, "no writable cgroup v1 here", &skip);
  if (!confinement) GTEST_SKIP() << skip;
  JobLimits limits;
  limits.memory_mib = 64;
  auto job = confinement->Create("oom-g1", limits);
  ASSERT_TRUE(job.ok()) << job.status();
  Waiting child = StartWaiting("exec python3 -c 'x = bytearray(200 << 20); print(len(x))'");
  ASSERT_TRUE((*job)->Add(child.pid).ok());
  child.Release();
  const int status = Reap(child.pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  EXPECT_GE((*job)->OomKills(), 1);
  ASSERT_TRUE((*job)->KillAll(absl::Seconds(5)).ok());
  EXPECT_TRUE((*job)->Remove().ok());
  EXPECT_TRUE(confinement->Close().ok());
}

// Another card's device file (a stand-in made with mknod, numbered as /dev/full) cannot be
// opened from the cgroup; /dev/zero still can, and outside the cgroup the stand-in opens.
void ExpectAnotherCardsDeviceFileShut(CgroupVersion version) {
  std::string skip;
  auto confinement = OpenReal(version, "no writable cgroup here", &skip);
  if (!confinement) GTEST_SKIP() << skip;
  if (!confinement->DevicesEnforced()) GTEST_SKIP() << "device files cannot be restricted here";
  TempDir dir;
  const fs::path card = fs::path(dir.path()) / "nvidia7";
  ASSERT_EQ(mknod(card.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0) << std::strerror(errno);
  auto number = DeviceNumberOf(card.string());
  ASSERT_TRUE(number.ok()) << number.status();
  JobLimits limits;
  limits.denied_devices.push_back(*number);
  auto job = confinement->Create("devices-g1", limits);
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string script = absl::StrCat("head -c 1 /dev/zero > /dev/null || exit 3; head -c 1 ", card.string(),
                                          " > /dev/null && exit 4; exit 0");
  Waiting child = StartWaiting(script);
  ASSERT_TRUE((*job)->Add(child.pid).ok());
  child.Release();
  const int status = Reap(child.pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "exit " << WEXITSTATUS(status);
  ASSERT_TRUE((*job)->KillAll(absl::Seconds(5)).ok());
  EXPECT_TRUE((*job)->Remove().ok());
  EXPECT_TRUE(confinement->Close().ok());
  const int fd = open(card.c_str(), O_RDONLY);
  EXPECT_GE(fd, 0);
  if (fd >= 0) close(fd);
}

TEST(CgroupV1Real, AnotherCardsDeviceFileCannotBeOpened) { ExpectAnotherCardsDeviceFileShut(CgroupVersion::kV1); }

// On v2 through the BPF program (src/agent/device_filter).
TEST(CgroupV2Real, AnotherCardsDeviceFileCannotBeOpened) { ExpectAnotherCardsDeviceFileShut(CgroupVersion::kV2); }

}  // namespace
}  // namespace hetpool::agent
