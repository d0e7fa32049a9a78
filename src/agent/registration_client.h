// Which daemon address the agent registers with, and how long it waits between tries. The
// addresses are tried in turn; a follower that names the leader ("leader is at ...") sends the
// next try there at once, at most once round the list without a wait (replicas with stale views
// could name each other); otherwise the wait doubles from 200 ms to 5 s. An address that could
// not be connected to at all is waited on: the wait ends as soon as it connects.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "src/agent/daemon_link.h"

namespace hetpool::agent {

class RegistrationClient {
 public:
  // `dialer` outlives the client; `servers` is not empty.
  RegistrationClient(std::vector<std::string> servers, DaemonDialer* dialer, absl::Duration loop_period)
      : servers_(std::move(servers)), dialer_(dialer), loop_period_(loop_period) {}

  // Registers with the address whose turn it is: the link to keep on success, nullptr on failure
  // (said in the log, and `*status` when given), the next address then chosen.
  std::unique_ptr<DaemonLink> Register(const hetpool::v1::RegisterRequest& req, hetpool::v1::RegisterResponse* resp,
                                       grpc::Status* status = nullptr);
  // The wait after a failed try (or none made: discovery failed), `tick` called every loop
  // period meanwhile (false: stop waiting).
  void WaitBeforeNextTry(const std::function<bool()>& tick);

  // The address of the last try, and the wait the next failure will cost (for tests and logs).
  const std::string& last_server() const { return servers_[last_index_]; }
  absl::Duration backoff() const { return backoff_; }

 private:
  static constexpr absl::Duration kFirstBackoff = absl::Milliseconds(200);
  static constexpr absl::Duration kMaxBackoff = absl::Seconds(5);
  // After a refusal: the named leader's index if the message names one in the list.
  void FollowLeaderNamedIn(const std::string& message);

  std::vector<std::string> servers_;
  DaemonDialer* dialer_;
  absl::Duration loop_period_;
  size_t index_ = 0;           // whose turn it is
  size_t last_index_ = 0;      // the last tried
  bool unreachable_ = false;   // the last try reached no daemon
  bool leader_named_ = false;  // the last try was refused by a follower naming the leader
  size_t leader_hops_ = 0;     // tries in a row sent to a named leader without a wait
  absl::Duration backoff_ = kFirstBackoff;
};

}  // namespace hetpool::agent
