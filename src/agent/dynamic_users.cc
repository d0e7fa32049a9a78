#include "src/agent/dynamic_users.h"

#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "src/common/durable_file.h"
#include "src/common/flags.h"

namespace hetpool::agent {

absl::StatusOr<std::unique_ptr<DynamicUsers>> DynamicUsers::Open(std::string path, uid_t min, uid_t max) {
  if (min == 0 || min > max) return absl::InvalidArgumentError("dynamic users: the uid range must be above 0");
  std::unique_ptr<DynamicUsers> users(new DynamicUsers(std::move(path), min, max));
  if (access(users->path_.c_str(), F_OK) != 0) return users;
  auto text = ReadTextFile(users->path_);
  if (!text.ok()) return text.status();
  nlohmann::json doc = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(users->path_, ": expected {\"user\": uid, ...}"));
  }
  absl::MutexLock lock(&users->mu_);
  for (const auto& [user, uid] : doc.items()) {
    if (!uid.is_number_unsigned()) return absl::InvalidArgumentError(absl::StrCat(users->path_, ": [", user, "]: not a uid"));
    users->uids_[user] = uid.get<uid_t>();
  }
  return users;
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

absl::StatusOr<uid_t> DynamicUsers::UidFor(const std::string& user) {
  absl::MutexLock lock(&mu_);
  if (auto it = uids_.find(user); it != uids_.end()) return it->second;
  std::set<uid_t> taken;
  for (const auto& [name, uid] : uids_) taken.insert(uid);
  for (uid_t uid = min_; uid <= max_ && uid >= min_; ++uid) {
    // Never a uid the node's own accounts use.
    if (taken.contains(uid) || getpwuid(uid) != nullptr) continue;
    uids_[user] = uid;
    if (auto s = SaveLocked(); !s.ok()) {
      uids_.erase(user);
      return s;
    }
    return uid;
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("dynamic users: every uid in ", min_, "-", max_, " is taken; map users with --run-as-map"));
}

}  // namespace hetpool::agent
