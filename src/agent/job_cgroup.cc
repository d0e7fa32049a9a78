#include "src/agent/job_cgroup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "spdlog/spdlog.h"
#include "src/agent/device_filter.h"
#include "src/common/cpu_list.h"
#include "src/common/monotonic_clock.h"

namespace hetpool::agent {
namespace fs = std::filesystem;
namespace {

constexpr const char* kTop = "hetpool";
constexpr int64_t kCfsPeriodUs = 100000;

std::string Errno(const std::string& what) { return absl::StrCat(what, ": ", std::strerror(errno)); }

// Control files are written whole, in one write(2), as the kernel parses them.
absl::Status WriteControl(const fs::path& file, absl::string_view value) {
  // O_CREAT only matters in a directory shaped like cgroupfs (tests); cgroupfs refuses to
  // create a control file it does not have, so a missing controller still shows as an error.
  const int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::FailedPreconditionError(Errno(absl::StrCat("cannot open ", file.string())));
  const ssize_t n = write(fd, value.data(), value.size());
  const int error = errno;
  close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    errno = error;
    return absl::FailedPreconditionError(Errno(absl::StrCat("cannot write '", value, "' to ", file.string())));
  }
  return absl::OkStatus();
}

std::string ReadControl(const fs::path& file) {
  const int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

std::vector<pid_t> ReadPids(const fs::path& procs) {
  std::vector<pid_t> out;
  for (absl::string_view line : absl::StrSplit(ReadControl(procs), '\n', absl::SkipEmpty())) {
    int pid = 0;
    if (absl::SimpleAtoi(line, &pid) && pid > 0) out.push_back(pid);
  }
  return out;
}

// "oom_kill 3" in memory.events (v2) or memory.oom_control (v1).
int KeyedCount(const std::string& text, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, key) || !absl::ConsumePrefix(&line, " ")) continue;
    int value = 0;
    if (absl::SimpleAtoi(line, &value)) return value;
  }
  return 0;
}

// Every process in `dir` and in the cgroups below it (a container runtime makes its own below
// the job's: podman's libpod-<id> and conmon).
std::vector<pid_t> ReadPidsTree(const fs::path& dir) {
  std::vector<pid_t> out = ReadPids(dir / "cgroup.procs");
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_directory(ec) || entry.is_symlink(ec)) continue;
    const std::vector<pid_t> below = ReadPidsTree(entry.path());
    out.insert(out.end(), below.begin(), below.end());
  }
  return out;
}

absl::Status MakeDir(const fs::path& dir) {
  if (mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST) return absl::OkStatus();
  return absl::FailedPreconditionError(Errno(absl::StrCat("cannot create cgroup ", dir.string())));
}

absl::Status RemoveDir(const fs::path& dir) {
  if (rmdir(dir.c_str()) == 0 || errno == ENOENT) return absl::OkStatus();
  return absl::FailedPreconditionError(Errno(absl::StrCat("cannot remove cgroup ", dir.string())));
}

// A job's cgroup and the (empty) cgroups a runtime left below it, deepest first.
absl::Status RemoveTree(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> below;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_directory(ec) && !entry.is_symlink(ec)) below.push_back(entry.path());
  }
  for (const auto& child : below) {
    if (auto s = RemoveTree(child); !s.ok()) return s;
  }
  return RemoveDir(dir);
}

std::string Describe(const JobLimits& l, bool devices_enforced) {
  std::vector<std::string> parts;
  if (l.memory_mib > 0) {
    parts.push_back(absl::StrCat("memory ", l.memory_mib, " MiB", l.memory_asked ? "" : " (its cards' share)"));
  }
  if (l.cpu_milli > 0) parts.push_back(absl::StrCat("cpu ", l.cpu_milli, "m"));
  if (!l.cpus.empty()) parts.push_back(absl::StrCat("cores ", l.cpus));
  if (l.pids > 0) parts.push_back(absl::StrCat("pids ", l.pids));
  if (!l.denied_devices.empty()) {
    parts.push_back(devices_enforced
                        ? absl::StrCat(l.denied_devices.size(), " device file(s) of other cards denied")
                        : absl::StrCat(l.denied_devices.size(), " device file(s) of other cards NOT denied (",
                                       "no device filter can be attached here)"));
  }
  return absl::StrJoin(parts, ", ");
}

// Kills what `procs` lists until it lists nothing (or patience ends), each pid counted once.
// `stop`/`resume` freeze and thaw around each round where the version can (so nothing forks
// between the listing and the kill).
absl::StatusOr<int> KillListed(const fs::path& dir, absl::Duration patience, const std::function<void()>& stop,
                               const std::function<void()>& resume) {
  std::set<pid_t> killed;
  const absl::Time deadline = MonotonicNow() + patience;
  while (true) {
    stop();
    const std::vector<pid_t> pids = ReadPidsTree(dir);
    for (pid_t pid : pids) {
      if (kill(pid, SIGKILL) == 0) killed.insert(pid);
    }
    resume();
    if (pids.empty()) return static_cast<int>(killed.size());
    if (MonotonicNow() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(pids.size(), " process(es) still in ", dir.string(),
                                                      " after SIGKILL"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// ---- cgroup v2 ----

class CgroupV2Job : public JobCgroup {
 public:
  CgroupV2Job(fs::path dir, JobLimits limits, bool devices_enforced) : dir_(std::move(dir)) {
    limits_ = std::move(limits);
    description_ = Describe(limits_, devices_enforced);
  }
  absl::Status Add(pid_t pid) override { return WriteControl(dir_ / "cgroup.procs", absl::StrCat(pid)); }
  std::vector<pid_t> Processes() const override { return ReadPidsTree(dir_); }
  absl::StatusOr<int> KillAll(absl::Duration patience) override {
    const int listed = static_cast<int>(Processes().size());
    // cgroup.kill (Linux 5.14) kills the whole cgroup at once, forks in flight included.
    if (fs::exists(dir_ / "cgroup.kill") && WriteControl(dir_ / "cgroup.kill", "1").ok()) {
      const absl::Time deadline = MonotonicNow() + patience;
      while (!Processes().empty()) {
        if (MonotonicNow() > deadline) return absl::DeadlineExceededError(absl::StrCat(dir_.string(), " is not empty after cgroup.kill"));
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      return listed;
    }
    const fs::path freeze = dir_ / "cgroup.freeze";
    return KillListed(
        dir_, patience, [&] { WriteControl(freeze, "1").IgnoreError(); },
        [&] { WriteControl(freeze, "0").IgnoreError(); });
  }
  int OomKills() const override { return KeyedCount(ReadControl(dir_ / "memory.events"), "oom_kill"); }
  absl::Status Remove() override { return RemoveTree(dir_); }

 private:
  fs::path dir_;
};

class CgroupV2 : public Confinement {
 public:
  CgroupV2(fs::path root, fs::path parent, std::set<std::string> controllers)
      : root_(std::move(root)), parent_(std::move(parent)), controllers_(std::move(controllers)) {}
  // Whether device programs can be attached here: tried once at start on a cgroup made for it
  // and removed (which detaches the program), so that restarts leave no program behind (a
  // cgroup takes at most 64).
  void ProbeDevices() {
    const fs::path probe = parent_ / "device-filter-probe";
    devices_enforced_ = MakeDir(probe).ok() && AttachDeviceDenyList(probe.string(), {}).ok();
    RemoveDir(probe).IgnoreError();
  }

  CgroupVersion version() const override { return CgroupVersion::kV2; }
  std::string Describe() const override {
    return absl::StrCat("cgroup v2 (", absl::StrJoin(controllers_, " "), ") under ", parent_.string());
  }
  bool DevicesEnforced() const override { return devices_enforced_; }
  std::string Cpus() const override { return std::string(absl::StripAsciiWhitespace(ReadControl(parent_ / "cpuset.cpus.effective"))); }
  std::string Mems() const override { return std::string(absl::StripAsciiWhitespace(ReadControl(parent_ / "cpuset.mems.effective"))); }

  absl::StatusOr<std::unique_ptr<JobCgroup>> Create(const std::string& name, const JobLimits& limits) override {
    const fs::path dir = parent_ / name;
    if (auto s = MakeDir(dir); !s.ok()) return s;
    auto job = std::make_unique<CgroupV2Job>(dir, limits, devices_enforced_);
    job->set_path(absl::StrCat("/", fs::path(dir).lexically_relative(root_).string()));
    auto fail = [&](absl::Status s) {
      job->Remove().IgnoreError();
      return s;
    };
    if (devices_enforced_ && !limits.denied_devices.empty()) {
      if (auto s = AttachDeviceDenyList(dir.string(), limits.denied_devices); !s.ok()) return fail(s);
    }
    if (limits.memory_mib > 0 && Has("memory")) {
      if (auto s = WriteControl(dir / "memory.max", absl::StrCat(limits.memory_mib << 20)); !s.ok()) return fail(s);
      // Past its ask the job is killed, not swapped out slowly.
      if (fs::exists(dir / "memory.swap.max")) WriteControl(dir / "memory.swap.max", "0").IgnoreError();
    }
    if (limits.cpu_milli > 0 && Has("cpu")) {
      const std::string quota = absl::StrCat(limits.cpu_milli * kCfsPeriodUs / 1000, " ", kCfsPeriodUs);
      if (auto s = WriteControl(dir / "cpu.max", quota); !s.ok()) return fail(s);
    }
    if (Has("cpuset")) {
      if (!limits.cpus.empty()) {
        if (auto s = WriteControl(dir / "cpuset.cpus", limits.cpus); !s.ok()) return fail(s);
      }
      if (!limits.mems.empty()) {
        if (auto s = WriteControl(dir / "cpuset.mems", limits.mems); !s.ok()) return fail(s);
      }
    }
    if (limits.pids > 0 && Has("pids")) {
      if (auto s = WriteControl(dir / "pids.max", absl::StrCat(limits.pids)); !s.ok()) return fail(s);
    }
    return std::unique_ptr<JobCgroup>(std::move(job));
  }

  int StopLeftovers() override {
    int killed = 0;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(parent_, ec)) {
      if (!entry.is_directory()) continue;
      CgroupV2Job job(entry.path(), {}, false);
      auto n = job.KillAll(absl::Seconds(10));
      killed += n.ok() ? *n : 0;
      if (auto s = job.Remove(); !s.ok()) spdlog::warn("{}", std::string(s.message()));
    }
    return killed;
  }

  absl::Status Close() override { return RemoveDir(parent_); }

  // Makes <root>/hetpool/<agent> with the controllers enabled for its children (a v2 cgroup
  // with children holds no process itself, so these levels only ever hold job cgroups).
  absl::Status Prepare(const ConfinementOptions& options) {
    const std::string enable = absl::StrJoin(controllers_, " ", [](std::string* out, const std::string& c) {
      absl::StrAppend(out, "+", c);
    });
    for (const fs::path& level : {root_, root_ / kTop}) {
      if (level != root_) {
        if (auto s = MakeDir(level); !s.ok()) return s;
      }
      if (!enable.empty()) {
        if (auto s = WriteControl(level / "cgroup.subtree_control", enable); !s.ok()) return s;
      }
    }
    if (auto s = MakeDir(parent_); !s.ok()) return s;
    if (!enable.empty()) {
      if (auto s = WriteControl(parent_ / "cgroup.subtree_control", enable); !s.ok()) return s;
    }
    if (options.jobs_memory_mib > 0 && Has("memory")) {
      return WriteControl(parent_ / "memory.max", absl::StrCat(options.jobs_memory_mib << 20));
    }
    return absl::OkStatus();
  }

 private:
  bool Has(const std::string& controller) const { return controllers_.contains(controller); }

  fs::path root_, parent_;
  std::set<std::string> controllers_;  // those hetpool uses that the root offers
  bool devices_enforced_ = false;
};

// ---- cgroup v1 ----

// The controllers hetpool uses on v1; memory, pids and freezer are needed to confine at all.
constexpr const char* kV1Controllers[] = {"memory", "cpu", "cpuset", "pids", "freezer", "devices"};
constexpr const char* kV1Needed[] = {"memory", "pids", "freezer"};

class CgroupV1Job : public JobCgroup {
 public:
  CgroupV1Job(std::map<std::string, fs::path> dirs, JobLimits limits, bool devices_enforced) : dirs_(std::move(dirs)) {
    limits_ = std::move(limits);
    description_ = Describe(limits_, devices_enforced);
  }
  absl::Status Add(pid_t pid) override {
    // Every hierarchy, the freezer first: from then on a kill can catch the process.
    for (const char* c : {"freezer", "memory", "pids", "cpu", "cpuset", "devices"}) {
      auto it = dirs_.find(c);
      if (it == dirs_.end()) continue;
      if (auto s = WriteControl(it->second / "cgroup.procs", absl::StrCat(pid)); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  std::vector<pid_t> Processes() const override { return ReadPidsTree(dirs_.at("freezer")); }
  absl::StatusOr<int> KillAll(absl::Duration patience) override {
    const fs::path& freezer = dirs_.at("freezer");
    // Frozen, nothing can fork between reading the list and the kills; SIGKILL is delivered
    // once the cgroup thaws.
    auto freeze = [&] {
      if (!WriteControl(freezer / "freezer.state", "FROZEN").ok()) return;
      const absl::Time until = MonotonicNow() + absl::Seconds(1);
      while (absl::StripAsciiWhitespace(ReadControl(freezer / "freezer.state")) != "FROZEN" && MonotonicNow() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    };
    auto thaw = [&] { WriteControl(freezer / "freezer.state", "THAWED").IgnoreError(); };
    return KillListed(freezer, patience, freeze, thaw);
  }
  int OomKills() const override {
    auto it = dirs_.find("memory");
    return it == dirs_.end() ? 0 : KeyedCount(ReadControl(it->second / "memory.oom_control"), "oom_kill");
  }
  absl::Status Remove() override {
    absl::Status first;
    for (const auto& [c, dir] : dirs_) {
      if (auto s = RemoveTree(dir); !s.ok() && first.ok()) first = s;
    }
    return first;
  }

 private:
  std::map<std::string, fs::path> dirs_;  // controller -> this job's directory in its hierarchy
};

class CgroupV1 : public Confinement {
 public:
  CgroupV1(std::map<std::string, fs::path> parents) : parents_(std::move(parents)) {}

  CgroupVersion version() const override { return CgroupVersion::kV1; }
  std::string Describe() const override {
    std::vector<std::string> names;
    for (const auto& [c, dir] : parents_) names.push_back(c);
    return absl::StrCat("cgroup v1 (", absl::StrJoin(names, " "), ") under ", parents_.at("memory").string(),
                        " and its siblings");
  }
  bool DevicesEnforced() const override { return parents_.contains("devices"); }
  std::string Cpus() const override { return Cpuset("cpuset.cpus"); }
  std::string Mems() const override { return Cpuset("cpuset.mems"); }

  absl::StatusOr<std::unique_ptr<JobCgroup>> Create(const std::string& name, const JobLimits& limits) override {
    std::map<std::string, fs::path> dirs;
    for (const auto& [c, parent] : parents_) dirs[c] = parent / name;
    auto job = std::make_unique<CgroupV1Job>(dirs, limits, DevicesEnforced());
    // Every hierarchy holds it at the same path: <mount>/hetpool/<agent>/<name>.
    const fs::path& memory_parent = parents_.at("memory");
    job->set_path(absl::StrCat("/", kTop, "/", memory_parent.filename().string(), "/", name));
    auto fail = [&](absl::Status s) {
      job->Remove().IgnoreError();
      return s;
    };
    for (const auto& [c, dir] : dirs) {
      if (auto s = MakeDir(dir); !s.ok()) return fail(s);
    }
    if (auto it = dirs.find("cpuset"); it != dirs.end()) {
      // A v1 cpuset starts with no cores and no memory nodes: nothing could run in it.
      const std::string cpus = limits.cpus.empty() ? Cpus() : limits.cpus;
      const std::string mems = limits.mems.empty() ? Mems() : limits.mems;
      if (auto s = WriteControl(it->second / "cpuset.cpus", cpus); !s.ok()) return fail(s);
      if (auto s = WriteControl(it->second / "cpuset.mems", mems); !s.ok()) return fail(s);
    }
    if (limits.memory_mib > 0) {
      const std::string bytes = absl::StrCat(limits.memory_mib << 20);
      if (auto s = WriteControl(dirs["memory"] / "memory.limit_in_bytes", bytes); !s.ok()) return fail(s);
      // Memory and swap together (where swap accounting is on): past its ask the job is killed.
      if (fs::exists(dirs["memory"] / "memory.memsw.limit_in_bytes")) {
        WriteControl(dirs["memory"] / "memory.memsw.limit_in_bytes", bytes).IgnoreError();
      }
    }
    if (auto it = dirs.find("cpu"); it != dirs.end() && limits.cpu_milli > 0) {
      if (auto s = WriteControl(it->second / "cpu.cfs_period_us", absl::StrCat(kCfsPeriodUs)); !s.ok()) return fail(s);
      const std::string quota = absl::StrCat(limits.cpu_milli * kCfsPeriodUs / 1000);
      if (auto s = WriteControl(it->second / "cpu.cfs_quota_us", quota); !s.ok()) return fail(s);
    }
    if (limits.pids > 0) {
      if (auto s = WriteControl(dirs["pids"] / "pids.max", absl::StrCat(limits.pids)); !s.ok()) return fail(s);
    }
    if (auto it = dirs.find("devices"); it != dirs.end()) {
      for (const DeviceNumber& d : limits.denied_devices) {
        const std::string rule = absl::StrCat(std::string(1, d.type), " ", d.major, ":", d.minor, " rwm");
        if (auto s = WriteControl(it->second / "devices.deny", rule); !s.ok()) return fail(s);
      }
    }
    return std::unique_ptr<JobCgroup>(std::move(job));
  }

  int StopLeftovers() override {
    std::set<std::string> names;
    std::error_code ec;
    for (const auto& [c, parent] : parents_) {
      for (const auto& entry : fs::directory_iterator(parent, ec)) {
        if (entry.is_directory()) names.insert(entry.path().filename().string());
      }
    }
    int killed = 0;
    for (const auto& name : names) {
      std::map<std::string, fs::path> dirs;
      for (const auto& [c, parent] : parents_) {
        if (fs::exists(parent / name)) dirs[c] = parent / name;
      }
      CgroupV1Job job(dirs, {}, false);
      if (dirs.contains("freezer")) {
        auto n = job.KillAll(absl::Seconds(10));
        killed += n.ok() ? *n : 0;
      }
      if (auto s = job.Remove(); !s.ok()) spdlog::warn("{}", std::string(s.message()));
    }
    return killed;
  }

  absl::Status Close() override {
    absl::Status first;
    for (const auto& [c, parent] : parents_) {
      if (auto s = RemoveDir(parent); !s.ok() && first.ok()) first = s;
    }
    return first;
  }

  // Makes <mount>/hetpool/<agent> in every hierarchy; cpusets get the root's cores and nodes.
  absl::Status Prepare(const std::map<std::string, fs::path>& mounts, const ConfinementOptions& options) {
    for (const auto& [c, parent] : parents_) {
      const fs::path top = mounts.at(c) / kTop;
      for (const fs::path& level : {top, parent}) {
        if (auto s = MakeDir(level); !s.ok()) return s;
        if (c == "cpuset") {
          for (const char* file : {"cpuset.cpus", "cpuset.mems"}) {
            const std::string value(absl::StripAsciiWhitespace(ReadControl(level.parent_path() / file)));
            if (auto s = WriteControl(level / file, value); !s.ok()) return s;
          }
        }
      }
    }
    if (options.jobs_memory_mib > 0) {
      return WriteControl(parents_.at("memory") / "memory.limit_in_bytes", absl::StrCat(options.jobs_memory_mib << 20));
    }
    return absl::OkStatus();
  }

 private:
  std::string Cpuset(const char* file) const {
    auto it = parents_.find("cpuset");
    return it == parents_.end() ? "" : std::string(absl::StripAsciiWhitespace(ReadControl(it->second / file)));
  }

  std::map<std::string, fs::path> parents_;  // controller -> <mount>/hetpool/<agent>
};

absl::StatusOr<std::unique_ptr<Confinement>> OpenCgroupV1(const CgroupMounts& mounts,
                                                          const ConfinementOptions& options) {
  std::vector<std::string> missing;
  for (const char* c : kV1Needed) {
    if (!mounts.v1.contains(c)) missing.push_back(c);
  }
  if (!missing.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cgroup v1: no ", absl::StrJoin(missing, ", "), " controller mounted"));
  }
  std::map<std::string, fs::path> parents, roots;
  for (const char* c : kV1Controllers) {
    auto it = mounts.v1.find(c);
    if (it == mounts.v1.end()) continue;
    roots[c] = it->second;
    parents[c] = fs::path(it->second) / kTop / options.agent_name;
  }
  auto v1 = std::make_unique<CgroupV1>(parents);
  if (auto s = v1->Prepare(roots, options); !s.ok()) return s;
  return std::unique_ptr<Confinement>(std::move(v1));
}

}  // namespace

absl::StatusOr<ConfineMode> ParseConfineMode(absl::string_view text) {
  if (text == "off") return ConfineMode::kOff;
  if (text == "auto") return ConfineMode::kAuto;
  if (text == "required") return ConfineMode::kRequired;
  return absl::InvalidArgumentError(absl::StrCat("--confine: '", text, "' is not off, auto or required"));
}

CgroupMounts ParseCgroupMounts(absl::string_view mounts_text) {
  CgroupMounts out;
  for (absl::string_view line : absl::StrSplit(mounts_text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() < 4) continue;
    if (f[2] == "cgroup2") {
      if (out.v2.empty()) out.v2 = std::string(f[1]);
    } else if (f[2] == "cgroup") {
      for (absl::string_view option : absl::StrSplit(f[3], ',')) {  // "rw,nosuid,cpu,cpuacct"
        for (const char* c : kV1Controllers) {
          if (option == c && !out.v1.contains(c)) out.v1[c] = std::string(f[1]);
        }
      }
    }
  }
  return out;
}

absl::StatusOr<DeviceNumber> DeviceNumberOf(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return absl::NotFoundError(Errno(path));
  if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode)) return absl::NotFoundError(absl::StrCat(path, " is no device file"));
  return DeviceNumber{S_ISCHR(st.st_mode) ? 'c' : 'b', major(st.st_rdev), minor(st.st_rdev), path};
}

void JobCgroup::SignalAll(int signal) const {
  for (pid_t pid : Processes()) kill(pid, signal);
}

absl::StatusOr<int> KillJobCgroupOf(pid_t pid, absl::Duration patience) {
  const CgroupMounts mounts = ParseCgroupMounts(ReadControl("/proc/self/mounts"));
  const std::string top = absl::StrCat("/", kTop, "/");
  for (absl::string_view line : absl::StrSplit(ReadControl(absl::StrCat("/proc/", pid, "/cgroup")), '\n',
                                               absl::SkipEmpty())) {
    // "7:freezer:/hetpool/node-a-1f2e3d4c/job-000001-g1" (v1) or "0::/hetpool/..." (v2)
    const std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3 || !absl::StartsWith(f[2], top)) continue;
    const std::vector<std::string> controllers = absl::StrSplit(f[1], ',');
    const std::string relative = f[2].substr(1);
    if (f[1].empty() && !mounts.v2.empty()) {
      CgroupV2Job job(fs::path(mounts.v2) / relative, {}, false);
      return job.KillAll(patience);
    }
    if (std::find(controllers.begin(), controllers.end(), "freezer") != controllers.end() &&
        mounts.v1.contains("freezer")) {
      CgroupV1Job job({{"freezer", fs::path(mounts.v1.at("freezer")) / relative}}, {}, false);
      return job.KillAll(patience);
    }
  }
  return absl::NotFoundError(absl::StrCat("process ", pid, " is in no job cgroup"));
}

absl::StatusOr<std::unique_ptr<Confinement>> OpenCgroupV2(const std::string& root, const ConfinementOptions& options) {
  std::set<std::string> offered;
  for (absl::string_view c : absl::StrSplit(ReadControl(fs::path(root) / "cgroup.controllers"), absl::ByAnyChar(" \n"),
                                            absl::SkipEmpty())) {
    offered.insert(std::string(c));
  }
  std::set<std::string> used;
  for (const char* c : {"memory", "cpu", "cpuset", "pids"}) {
    if (offered.contains(c)) used.insert(c);
  }
  auto v2 = std::make_unique<CgroupV2>(root, fs::path(root) / kTop / options.agent_name, used);
  if (auto s = v2->Prepare(options); !s.ok()) return s;
  v2->ProbeDevices();
  return std::unique_ptr<Confinement>(std::move(v2));
}

absl::StatusOr<std::unique_ptr<Confinement>> Confinement::Open(const ConfinementOptions& options) {
  const CgroupMounts mounts = ParseCgroupMounts(ReadControl(options.mounts_file));
  std::vector<std::string> why;
  // v2 confines only with its memory and pids controllers (a hybrid host's unified tree often
  // has neither: then v1 does the work).
  const std::string controllers = mounts.v2.empty() ? "" : ReadControl(fs::path(mounts.v2) / "cgroup.controllers");
  const std::set<std::string> offered = absl::StrSplit(controllers, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  const bool v2_usable = !mounts.v2.empty() && offered.contains("memory") && offered.contains("pids");
  if (options.version != CgroupVersion::kV1) {
    if (v2_usable || options.version == CgroupVersion::kV2) {
      auto v2 = OpenCgroupV2(mounts.v2, options);
      if (v2.ok() || options.version == CgroupVersion::kV2) return v2;
      why.push_back(std::string(v2.status().message()));
    } else {
      why.push_back(mounts.v2.empty() ? "no cgroup2 filesystem mounted"
                                      : absl::StrCat("cgroup v2 at ", mounts.v2, " offers no memory and pids controllers"));
    }
  }
  auto v1 = OpenCgroupV1(mounts, options);
  if (v1.ok()) return v1;
  why.push_back(std::string(v1.status().message()));
  return absl::FailedPreconditionError(absl::StrCat("cannot confine jobs: ", absl::StrJoin(why, "; ")));
}

}  // namespace hetpool::agent
