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

#include "src/agent/cgroup_files.h"

namespace hetpool::agent {
using namespace cgroup_files;  // the helpers of cgroup_files.h, shared by the two versions

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
  if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode))
    return absl::NotFoundError(absl::StrCat(path, " is no device file"));
  return DeviceNumber{S_ISCHR(st.st_mode) ? 'c' : 'b', major(st.st_rdev), minor(st.st_rdev), path};
}

void JobCgroup::SignalAll(int signal) const {
  for (pid_t pid : Processes()) kill(pid, signal);
}

absl::StatusOr<int> KillJobCgroupOf(pid_t pid, absl::Duration patience) {
  const CgroupMounts mounts = ParseCgroupMounts(ReadControl("/proc/self/mounts"));
  const std::string top = absl::StrCat("/", kTop, "/");
  for (absl::string_view line :
       absl::StrSplit(ReadControl(absl::StrCat("/proc/", pid, "/cgroup")), '\n', absl::SkipEmpty())) {
    // "7:freezer:/hetpool/node-a-1f2e3d4c/job-000001-g1" (v1) or "0::/hetpool/..." (v2)
    const std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3 || !absl::StartsWith(f[2], top)) continue;
    const std::vector<std::string> controllers = absl::StrSplit(f[1], ',');
    const std::string relative = f[2].substr(1);
    if (f[1].empty() && !mounts.v2.empty()) {
      return ExistingV2Job(fs::path(mounts.v2) / relative)->KillAll(patience);
    }
    if (std::find(controllers.begin(), controllers.end(), "freezer") != controllers.end() &&
        mounts.v1.contains("freezer")) {
      return ExistingV1Job(fs::path(mounts.v1.at("freezer")) / relative)->KillAll(patience);
    }
  }
  return absl::NotFoundError(absl::StrCat("process ", pid, " is in no job cgroup"));
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
      why.push_back(mounts.v2.empty()
                        ? "no cgroup2 filesystem mounted"
                        : absl::StrCat("cgroup v2 at ", mounts.v2, " offers no memory and pids controllers"));
    }
  }
  auto v1 = OpenCgroupV1(mounts, options);
  if (v1.ok()) return v1;
  why.push_back(std::string(v1.status().message()));
  return absl::FailedPreconditionError(absl::StrCat("cannot confine jobs: ", absl::StrJoin(why, "; ")));
}

}  // namespace hetpool::agent
