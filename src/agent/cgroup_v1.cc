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

// ---- cgroup v1 ----

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

}  // namespace

namespace cgroup_files {

std::unique_ptr<JobCgroup> ExistingV1Job(const fs::path& freezer_dir) {
  return std::make_unique<CgroupV1Job>(std::map<std::string, fs::path>{{"freezer", freezer_dir}}, JobLimits{}, false);
}

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

}  // namespace cgroup_files
}  // namespace hetpool::agent
