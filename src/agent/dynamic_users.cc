#include "src/agent/dynamic_users.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"
#include "src/common/durable_file.h"
#include "src/common/flags.h"

namespace hetpool::agent {
namespace {

// The host's lock on its table, held while it lives: every agent of the host reads, allocates
// and writes under it.
class HostLock {
 public:
  static absl::StatusOr<HostLock> Take(const std::string& table) {
    const std::filesystem::path dir = std::filesystem::path(table).parent_path();
    std::error_code ec;
    if (!dir.empty()) std::filesystem::create_directories(dir, ec);
    const std::string path = table + ".lock";
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("dynamic users: open ", path));
    while (::flock(fd, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      return absl::ErrnoToStatus(error, absl::StrCat("dynamic users: lock ", path));
    }
    return HostLock(fd);
  }
  HostLock(HostLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  HostLock(const HostLock&) = delete;
  HostLock& operator=(const HostLock&) = delete;
  HostLock& operator=(HostLock&&) = delete;
  ~HostLock() {
    if (fd_ >= 0) ::close(fd_);  // drops the lock
  }

 private:
  explicit HostLock(int fd) : fd_(fd) {}
  int fd_;
};

// The table at `path`: {"user": uid, ...}; empty when the file does not exist.
absl::StatusOr<std::map<std::string, uid_t>> ReadTable(const std::string& path) {
  std::map<std::string, uid_t> uids;
  if (access(path.c_str(), F_OK) != 0) return uids;
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  nlohmann::json doc = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": expected {\"user\": uid, ...}"));
  }
  for (const auto& [user, uid] : doc.items()) {
    if (!uid.is_number_unsigned()) return absl::InvalidArgumentError(absl::StrCat(path, ": [", user, "]: not a uid"));
    uids[user] = uid.get<uid_t>();
  }
  return uids;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DynamicUsers>> DynamicUsers::Open(std::string path, uid_t min, uid_t max,
                                                                 const std::string& legacy) {
  if (min == 0 || min > max) return absl::InvalidArgumentError("dynamic users: the uid range must be above 0");
  std::unique_ptr<DynamicUsers> users(new DynamicUsers(std::move(path), min, max));
  {
    absl::MutexLock lock(&users->mu_);
    auto table = ReadTable(users->path_);
    if (!table.ok()) return table.status();
    users->uids_ = *std::move(table);
  }
  if (!legacy.empty() && legacy != users->path_ && access(legacy.c_str(), F_OK) == 0) {
    if (absl::Status s = users->MergeLegacy(legacy); !s.ok()) return s;
  }
  return users;
}

absl::Status DynamicUsers::MergeLegacy(const std::string& legacy) {
  auto old = ReadTable(legacy);
  if (!old.ok()) return old.status();
  absl::MutexLock lock(&mu_);
  auto host = HostLock::Take(path_);
  if (!host.ok()) return host.status();
  if (absl::Status s = ReloadLocked(); !s.ok()) return s;
  std::set<uid_t> taken;
  for (const auto& [name, uid] : uids_) taken.insert(uid);
  for (const auto& [user, uid] : *old) {
    if (uids_.contains(user)) continue;
    if (!taken.contains(uid) && uid >= min_ && uid <= max_) {
      uids_[user] = uid;
      taken.insert(uid);
      continue;
    }
    // Another agent of this host gave that uid to someone else: this user gets a new one.
    auto fresh = AllocateLocked(user);
    if (!fresh.ok()) return fresh.status();
    spdlog::warn("dynamic users: {} had uid {} in {}, which this host's table gives another user; {} now runs as {}",
                 user, uid, legacy, user, *fresh);
    taken.insert(*fresh);
  }
  if (absl::Status s = SaveLocked(); !s.ok()) return s;
  std::error_code ec;
  std::filesystem::rename(legacy, legacy + ".merged", ec);
  if (ec) spdlog::warn("dynamic users: merged {} into {}, but could not rename it: {}", legacy, path_, ec.message());
  return absl::OkStatus();
}

absl::Status DynamicUsers::ReloadLocked() {
  auto table = ReadTable(path_);
  if (!table.ok()) return table.status();
  uids_ = *std::move(table);
  return absl::OkStatus();
}

absl::Status DynamicUsers::SaveLocked() {
  nlohmann::json doc = nlohmann::json::object();
  for (const auto& [user, uid] : uids_) doc[user] = uid;
  // Durable before use: a uid handed out and then forgotten could go to another user next time.
  if (absl::Status s = ReplaceFileDurably(path_, doc.dump(1)); !s.ok()) {
    return absl::InternalError(absl::StrCat("dynamic users: ", s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<uid_t> DynamicUsers::AllocateLocked(const std::string& user) {
  std::set<uid_t> taken;
  for (const auto& [name, uid] : uids_) taken.insert(uid);
  for (uid_t uid = min_; uid <= max_ && uid >= min_; ++uid) {
    // Never a uid the node's own accounts use.
    if (taken.contains(uid) || getpwuid(uid) != nullptr) continue;
    uids_[user] = uid;
    return uid;
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("dynamic users: every uid in ", min_, "-", max_, " is taken; map users with --run-as-map"));
}

absl::StatusOr<uid_t> DynamicUsers::UidFor(const std::string& user) {
  absl::MutexLock lock(&mu_);
  // A uid once given is never taken back: what this agent knows holds without the host's lock.
  if (auto it = uids_.find(user); it != uids_.end()) return it->second;
  auto host = HostLock::Take(path_);
  if (!host.ok()) return host.status();
  if (absl::Status s = ReloadLocked(); !s.ok()) return s;  // another agent of the host may have added users
  if (auto it = uids_.find(user); it != uids_.end()) return it->second;
  auto uid = AllocateLocked(user);
  if (!uid.ok()) return uid.status();
  if (auto s = SaveLocked(); !s.ok()) {
    uids_.erase(user);
    return s;
  }
  return uid;
}

}  // namespace hetpool::agent
