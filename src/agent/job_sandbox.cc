#include "src/agent/job_sandbox.h"

#include <grp.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "src/common/names.h"

namespace hetpool::agent {
namespace {

// Local accounts: the name characters (names.h) within useradd's 32, not starting with '-'.
bool ValidAccountName(const std::string& name) {
  return !name.empty() && name.size() <= 32 && name[0] != '-' && std::all_of(name.begin(), name.end(), IsNameChar);
}

}  // namespace

std::string RealPath(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : "";
}

bool ResolvesInside(const std::string& real, const std::vector<std::string>& roots) {
  return std::any_of(roots.begin(), roots.end(), [&](const std::string& root) {
    const std::string r = RealPath(root);
    if (r.empty()) return false;
    if (r == "/") return true;
    return real == r || (real.size() > r.size() && real.compare(0, r.size(), r) == 0 && real[r.size()] == '/');
  });
}

absl::StatusOr<std::string> ResolveWorkingDir(const std::string& dir, const std::vector<std::string>& roots) {
  const std::string real = RealPath(dir);
  if (real.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("cannot enter working_dir ", dir, ": ", std::strerror(errno)));
  }
  if (ResolvesInside(real, roots)) return real;
  return absl::FailedPreconditionError(
      absl::StrCat("working_dir ", dir, real == dir ? "" : absl::StrCat(" (really ", real, ")"),
                   " is outside this node's job directories (", absl::StrJoin(roots, ", "), "; agent --job-dirs)"));
}

absl::StatusOr<RunAs> ResolveRunAs(const std::string& user, const SandboxOptions& options, uid_t agent_uid) {
  RunAs run_as;
  if (agent_uid != 0) return run_as;  // cannot switch; documented
  std::string account = options.run_as;
  if (auto it = options.run_as_map.find(user); it != options.run_as_map.end()) {
    account = it->second;
  } else if (auto star = options.run_as_map.find("*"); star != options.run_as_map.end()) {
    account = star->second;
  }
  if (account == kDynamicAccount) {
    if (options.dynamic_users == nullptr)
      return absl::FailedPreconditionError("dynamic users are not set up on this node");
    auto uid = options.dynamic_users->UidFor(user);
    if (!uid.ok()) return uid.status();
    run_as.switch_user = true;
    run_as.uid = *uid;
    run_as.gid = *uid;  // a group of its own too, and no supplementary groups
    run_as.account = absl::StrCat("hetpool-", user);
    return run_as;  // no home: HOME is the run directory
  }
  std::vector<char> buf(16384);
  struct passwd pw {};
  struct passwd* found = nullptr;
  if (getpwnam_r(account.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("user ", user, " runs as Unix account '", account, "', which this node does not have"));
  }
  run_as.switch_user = pw.pw_uid != 0;
  run_as.uid = pw.pw_uid;
  run_as.gid = pw.pw_gid;
  run_as.account = account;
  std::error_code ec;
  if (pw.pw_dir != nullptr && std::filesystem::is_directory(pw.pw_dir, ec)) run_as.home = pw.pw_dir;
  int count = 64;
  std::vector<gid_t> groups(static_cast<size_t>(count));
  if (getgrouplist(account.c_str(), pw.pw_gid, groups.data(), &count) < 0) {
    groups.resize(static_cast<size_t>(count));
    getgrouplist(account.c_str(), pw.pw_gid, groups.data(), &count);
  }
  groups.resize(static_cast<size_t>(std::max(count, 0)));
  run_as.groups = std::move(groups);
  return run_as;
}

absl::StatusOr<std::map<std::string, std::string>> ParseRunAsMap(absl::string_view json_text) {
  nlohmann::json doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return absl::InvalidArgumentError("not valid JSON");
  if (!doc.is_object()) return absl::InvalidArgumentError("expected {\"hetpool user\": \"unix account\", \"*\": ...}");
  std::map<std::string, std::string> map;
  for (const auto& [user, account] : doc.items()) {
    if (user.empty() || user.size() > 64) return absl::InvalidArgumentError("user names must be 1-64 characters");
    if (!account.is_string() || !ValidAccountName(account.get<std::string>())) {
      return absl::InvalidArgumentError(absl::StrCat("[", user, "]: expected a Unix account name"));
    }
    map[user] = account.get<std::string>();
  }
  return map;
}

std::string WorkingDirUnwritable(const std::string& dir, const RunAs& run_as) {
  struct stat st {};
  struct statvfs fs {};
  if (stat(dir.c_str(), &st) != 0) return "";  // a missing dir is said where the launch fails
  const uid_t uid = run_as.switch_user ? run_as.uid : geteuid();
  const bool read_only = statvfs(dir.c_str(), &fs) == 0 && (fs.f_flag & ST_RDONLY) != 0;
  bool may = uid == 0;
  if (!may && st.st_uid == uid) {
    may = (st.st_mode & S_IWUSR) != 0;
  } else if (!may) {
    const gid_t gid = run_as.switch_user ? run_as.gid : getegid();
    const bool in_group =
        st.st_gid == gid || std::find(run_as.groups.begin(), run_as.groups.end(), st.st_gid) != run_as.groups.end();
    may = in_group ? (st.st_mode & S_IWGRP) != 0 : (st.st_mode & S_IWOTH) != 0;
  }
  if (may && !read_only) return "";
  return absl::StrCat("working dir ", dir, " is not writable by the job's account ",
                      run_as.account.empty() ? "root" : run_as.account, " (uid ", uid, ")",
                      read_only ? ": its filesystem is read-only" : "");
}

}  // namespace hetpool::agent
