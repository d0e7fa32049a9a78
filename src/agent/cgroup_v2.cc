#include "src/agent/cgroup_files.h"

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
using namespace cgroup_files;  // the helpers of cgroup_files.h, shared by the two versions
namespace {

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
        if (MonotonicNow() > deadline)
          return absl::DeadlineExceededError(absl::StrCat(dir_.string(), " is not empty after cgroup.kill"));
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
  std::string Cpus() const override {
    return std::string(absl::StripAsciiWhitespace(ReadControl(parent_ / "cpuset.cpus.effective")));
  }
  std::string Mems() const override {
    return std::string(absl::StripAsciiWhitespace(ReadControl(parent_ / "cpuset.mems.effective")));
  }

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
    const std::string enable =
        absl::StrJoin(controllers_, " ", [](std::string* out, const std::string& c) { absl::StrAppend(out, "+", c); });
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

}  // namespace

namespace cgroup_files {
std::unique_ptr<JobCgroup> ExistingV2Job(const fs::path& dir) {
  return std::make_unique<CgroupV2Job>(dir, JobLimits{}, false);
}
}  // namespace cgroup_files

absl::StatusOr<std::unique_ptr<Confinement>> OpenCgroupV2(const std::string& root, const ConfinementOptions& options) {
  std::set<std::string> offered;
  for (absl::string_view c :
       absl::StrSplit(ReadControl(fs::path(root) / "cgroup.controllers"), absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
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

}  // namespace hetpool::agent
