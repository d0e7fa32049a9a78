#include "src/agent/run_dir_janitor.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace hetpool::agent {
namespace {

// Removes every entry of the directory open at `dir` (the descriptor is the caller's).
absl::Status EmptyDirectoryAt(int dir, const std::string& shown) {
  const int listing = ::dup(dir);
  if (listing < 0) return absl::ErrnoToStatus(errno, absl::StrCat("dup ", shown));
  DIR* entries = ::fdopendir(listing);
  if (entries == nullptr) {
    ::close(listing);
    return absl::ErrnoToStatus(errno, absl::StrCat("list ", shown));
  }
  absl::Status status;
  while (const dirent* entry = ::readdir(entries)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone meanwhile
    if (S_ISDIR(st.st_mode)) {
      const int child = ::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (child < 0) {
        status.Update(absl::ErrnoToStatus(errno, absl::StrCat("open ", shown, "/", name)));
        continue;
      }
      status.Update(EmptyDirectoryAt(child, shown + "/" + name));
      ::close(child);
      if (::unlinkat(dir, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
        status.Update(absl::ErrnoToStatus(errno, absl::StrCat("remove ", shown, "/", name)));
      }
    } else if (::unlinkat(dir, name.c_str(), 0) != 0 && errno != ENOENT) {
      status.Update(absl::ErrnoToStatus(errno, absl::StrCat("remove ", shown, "/", name)));
    }
  }
  ::closedir(entries);
  return status;
}

uint64_t UsageAt(int dir, dev_t device) {
  const int listing = ::dup(dir);
  if (listing < 0) return 0;
  DIR* entries = ::fdopendir(listing);
  if (entries == nullptr) {
    ::close(listing);
    return 0;
  }
  uint64_t bytes = 0;
  while (const dirent* entry = ::readdir(entries)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    bytes += static_cast<uint64_t>(st.st_blocks) * 512;
    if (!S_ISDIR(st.st_mode) || st.st_dev != device) continue;
    const int child = ::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (child < 0) continue;
    bytes += UsageAt(child, device);
    ::close(child);
  }
  ::closedir(entries);
  return bytes;
}

// "g12" -> 12.
bool ParseGeneration(absl::string_view name, uint64_t* generation) {
  return absl::ConsumePrefix(&name, "g") && absl::SimpleAtoi(name, generation);
}

}  // namespace

absl::Status RemoveTreeNoFollow(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    return errno == ENOENT ? absl::OkStatus() : absl::ErrnoToStatus(errno, absl::StrCat("stat ", path));
  }
  if (S_ISDIR(st.st_mode)) {
    const int dir = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
    absl::Status emptied = EmptyDirectoryAt(dir, path);
    ::close(dir);
    if (!emptied.ok()) return emptied;
    if (::rmdir(path.c_str()) != 0 && errno != ENOENT) return absl::ErrnoToStatus(errno, absl::StrCat("remove ", path));
    return absl::OkStatus();
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return absl::ErrnoToStatus(errno, absl::StrCat("remove ", path));
  return absl::OkStatus();
}

uint64_t DiskUsageNoFollow(const std::string& path) {
  const int dir = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) return 0;
  struct stat st {};
  uint64_t bytes = 0;
  if (::fstat(dir, &st) == 0) bytes = static_cast<uint64_t>(st.st_blocks) * 512 + UsageAt(dir, st.st_dev);
  ::close(dir);
  return bytes;
}

RunDirJanitor::Sweep RunDirJanitor::Run(const std::set<Key>& running, absl::Time now) const {
  namespace fs = std::filesystem;
  Sweep sweep;
  const fs::path jobs = fs::path(options_.work_dir) / "jobs";
  const fs::path logs = fs::path(options_.work_dir) / "logs";
  std::error_code ec;
  // Job ids are hetpoold's ("job-000042"): names of the agent's own making, listed without
  // following anything.
  for (const auto& job : fs::directory_iterator(jobs, ec)) {
    if (!job.is_directory(ec) || job.is_symlink(ec)) continue;
    const std::string id = job.path().filename().string();
    for (const auto& gen : fs::directory_iterator(job.path(), ec)) {
      uint64_t generation = 0;
      if (!ParseGeneration(gen.path().filename().string(), &generation)) continue;
      const Key key{id, generation};
      const std::string run_dir = gen.path().string();
      if (running.contains(key)) {
        if (options_.job_disk_limit_mib == 0) continue;
        const uint64_t used = DiskUsageNoFollow(run_dir);
        if (used > options_.job_disk_limit_mib << 20) {
          sweep.over_limit.emplace_back(
              key,
              absl::StrFormat("its run directory %s holds %.1f GiB, over this node's limit of %.1f GiB per job "
                              "(hetpool-agent --job-disk-limit-mib %u); write large outputs to a job directory",
                              run_dir, static_cast<double>(used) / (1 << 30),
                              static_cast<double>(options_.job_disk_limit_mib) / 1024, options_.job_disk_limit_mib));
        }
        continue;
      }
      // Ended when its node log was last written (the agent's file); else the directory's time.
      const fs::path log = logs / id / gen.path().filename();
      struct stat st {};
      const std::string dated = ::lstat((log / "node.log").c_str(), &st) == 0 ? (log / "node.log").string() : run_dir;
      if (dated == run_dir && ::lstat(run_dir.c_str(), &st) != 0) continue;
      if (now - absl::FromTimeT(st.st_mtime) < options_.retention) continue;
      if (RemoveTreeNoFollow(run_dir).ok() && RemoveTreeNoFollow(log.string()).ok()) sweep.removed.push_back(key);
    }
    // A job with no generation left goes whole (an empty directory: rmdir fails otherwise).
    ::rmdir(job.path().c_str());
    ::rmdir((logs / id).c_str());
  }
  return sweep;
}

}  // namespace hetpool::agent
