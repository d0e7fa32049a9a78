// A Unix uid of its own for every hetpool user, as systemd's DynamicUser= does: jobs of different
// users never share an account, so one cannot read another's /proc/*/environ, signal its
// processes or write into its run directory. Uids come from a range no account of the node uses
// (default 61184-65519, systemd's), are allocated on first use and kept in a file in the agent's
// work dir, so a user keeps the same uid on this node across jobs and agent restarts. They have
// no passwd entry: a job sees its uid, HOME is its run directory, and it reaches what "others"
// may reach. (On shared filesystems, map users to real accounts with --run-as-map instead: the
// numbers differ from node to node.)
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace hetpool::agent {

class DynamicUsers {
 public:
  static constexpr uid_t kDefaultMin = 61184;
  static constexpr uid_t kDefaultMax = 65519;

  // Loads `path` (missing: no user yet). INVALID_ARGUMENT when it does not parse.
  static absl::StatusOr<std::unique_ptr<DynamicUsers>> Open(std::string path, uid_t min = kDefaultMin,
                                                           uid_t max = kDefaultMax);

  // The user's uid, allocated (and written to disk before it is returned) on first use.
  // RESOURCE_EXHAUSTED when the range is full.
  absl::StatusOr<uid_t> UidFor(const std::string& user);

 private:
  DynamicUsers(std::string path, uid_t min, uid_t max) : path_(std::move(path)), min_(min), max_(max) {}
  absl::Status SaveLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  const uid_t min_, max_;
  absl::Mutex mu_;
  std::map<std::string, uid_t> uids_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hetpool::agent
