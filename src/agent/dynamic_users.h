// A Unix uid of its own for every hetpool user, as systemd's DynamicUser= does: jobs of different
// users never share an account, so one cannot read another's /proc/*/environ, signal its
// processes or write into its run directory. Uids come from a range no account of the node uses
// (default 61184-65519, systemd's), are allocated on first use and kept in one table per host
// (default /var/lib/hetpool/dynamic-users.json), so a user keeps the same uid on this host
// across jobs, agent restarts and every agent the host runs. The table is read and written under
// an exclusive lock on PATH.lock: two agents on one host (the quickstart runs two) each kept a
// table of their own, both starting at 61184, and handed two users the same uid (issue 60,
// item 4). The uids have no passwd entry: a job sees its uid, HOME is its run directory, and it
// reaches what "others" may reach. (On shared filesystems, map users to real accounts with
// --run-as-map instead: the numbers differ from host to host.)
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
  static constexpr const char* kDefaultPath = "/var/lib/hetpool/dynamic-users.json";

  // The host's table at `path` (missing: no user yet; made on first use). `legacy`: a table an
  // older agent kept in its own work dir; its users are taken into the host's table, each with
  // its old uid unless another user has that uid there (then a new one), and the file is renamed
  // to LEGACY.merged. INVALID_ARGUMENT when a table does not parse.
  static absl::StatusOr<std::unique_ptr<DynamicUsers>> Open(std::string path, uid_t min = kDefaultMin,
                                                            uid_t max = kDefaultMax, const std::string& legacy = "");

  // The user's uid, allocated (and written to disk before it is returned) on first use, under
  // the host's lock. RESOURCE_EXHAUSTED when the range is full.
  absl::StatusOr<uid_t> UidFor(const std::string& user);

 private:
  DynamicUsers(std::string path, uid_t min, uid_t max) : path_(std::move(path)), min_(min), max_(max) {}
  // Reads the host's table into uids_ (every agent's users); call with the host's lock held.
  absl::Status ReloadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SaveLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A free uid of the range for `user`, recorded in uids_ (not yet saved).
  absl::StatusOr<uid_t> AllocateLocked(const std::string& user) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status MergeLegacy(const std::string& legacy);

  const std::string path_;
  const uid_t min_, max_;
  absl::Mutex mu_;
  std::map<std::string, uid_t> uids_ ABSL_GUARDED_BY(mu_);  // the table as last read or written
};

}  // namespace hetpool::agent
