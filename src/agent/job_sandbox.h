// Where and as whom a job's processes run on this node.
//   - The working directory must resolve (symlinks followed) inside one of the agent's job
//     directories (--job-dirs, default its work dir): a job cannot wander into /etc or into
//     another job's files by a '..' or a planted symlink.
//   - An agent running as root starts processes as the owner's mapped Unix account
//     (--run-as-map), else as --run-as: by default "dynamic", a uid of the user's own
//     (dynamic_users.h); never as root unless told to. An agent that is not root cannot
//     switch: processes run as the agent's own account.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/agent/dynamic_users.h"

namespace hetpool::agent {

// The account name that means "a uid of the user's own" (in --run-as and in --run-as-map).
inline constexpr const char* kDynamicAccount = "dynamic";

struct SandboxOptions {
  std::vector<std::string> job_dirs;              // absolute; working dirs must resolve inside one
  std::map<std::string, std::string> run_as_map;  // hetpool user -> Unix account; "*" = everyone else
  std::string run_as = kDynamicAccount;           // account for users the map does not name
  DynamicUsers* dynamic_users = nullptr;          // the uids "dynamic" hands out
};

struct RunAs {
  bool switch_user = false;  // false: run as the agent's own account
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups of the account
  std::string account;
  std::string home;  // the account's home directory if it exists, else ""
};

// The real path of `path` (symlinks followed), "" when it does not resolve (errno says why).
std::string RealPath(const std::string& path);

// Whether the real path `real` is one of `roots` or below one (each root resolved first).
bool ResolvesInside(const std::string& real, const std::vector<std::string>& roots);

// The real path of `dir` if it lies inside one of `roots`; FAILED_PRECONDITION saying why not.
absl::StatusOr<std::string> ResolveWorkingDir(const std::string& dir, const std::vector<std::string>& roots);

// The account a job of `user` runs as here (`agent_uid`: the agent's effective uid).
absl::StatusOr<RunAs> ResolveRunAs(const std::string& user, const SandboxOptions& options, uid_t agent_uid);

// "working dir DIR is not writable by the job's account NAME (uid N)", or "" when `run_as` may
// write in the directory `dir` (its owner, group and other bits, its filesystem not read-only;
// ACLs are not read, so one that grants it is taken as not granting).
std::string WorkingDirUnwritable(const std::string& dir, const RunAs& run_as);

// --run-as-map's file: {"alice": "alice", "ci-bot": "ci", "*": "hetpool-jobs"}.
absl::StatusOr<std::map<std::string, std::string>> ParseRunAsMap(absl::string_view json_text);

}  // namespace hetpool::agent
