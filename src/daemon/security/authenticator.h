// Who is calling: a bearer token from the token file (users, CI), or a verified client
// certificate naming a node (agents). The token file is re-read when it changes, so adding or
// revoking a token needs no restart; a file that stops parsing keeps the last good table.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "src/common/monotonic_clock.h"
#include "src/common/watched_file.h"
#include "src/common/token_file.h"

namespace hetpool::daemon {

class Authenticator {
 public:
  // `token_file`: the path of the hashed-token file; the first read must succeed. `clock` paces
  // the looks at the file (once a second): the monotonic clock, so that a wall clock stepped
  // back does not stop revocations from taking effect; tests inject theirs.
  static absl::StatusOr<std::unique_ptr<Authenticator>> Open(std::string token_file,
                                                             std::function<absl::Time()> clock = MonotonicNow);
  // Everyone is an unchecked caller (hetpoold --insecure).
  static std::unique_ptr<Authenticator> Unchecked();

  // `authorization`: the request's "authorization" header, if any ("Bearer <token>").
  // `cert_common_names`: the CNs of the client certificate the TLS layer verified (none without).
  // A token wins over a certificate: agents hold no token, users no node certificate.
  absl::StatusOr<Caller> Authenticate(std::optional<absl::string_view> authorization,
                                      const std::vector<std::string>& cert_common_names) const;

 private:
  Authenticator() = default;
  void ReloadIfChanged() const;

  bool unchecked_ = false;
  std::function<absl::Time()> clock_;
  mutable absl::Mutex mu_;
  mutable std::optional<WatchedFile> file_ ABSL_GUARDED_BY(mu_);
  mutable TokenTable table_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hetpool::daemon
