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

namespace hetpool::agent::cgroup_files {

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
      return absl::DeadlineExceededError(
          absl::StrCat(pids.size(), " process(es) still in ", dir.string(), " after SIGKILL"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace hetpool::agent::cgroup_files
