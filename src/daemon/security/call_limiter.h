// Calls in flight per user and streams per user and per connection, each capped: one user with
// 8,000 WatchJob streams held 8,031 daemon threads (the sync server gives each call a thread for
// its whole life), took RSS from 49 to 342 MB and made every other user's `list` 60 times slower;
// ~28,000 would have exhausted the host's pids (issue 60, item 6). Past a cap the call is refused
// RESOURCE_EXHAUSTED, saying which cap and that closing streams frees room. Agents are not
// counted: each holds one orders stream and beats, and the fleet's size is the operator's.
// Thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace hetpool::daemon {

struct CallLimits {
  int calls_per_user = 512;          // calls in flight (streams included) per user
  int streams_per_user = 256;        // WatchJob, GetJobLogs --follow, ... per user
  int streams_per_connection = 128;  // per client connection (HTTP/2 carries many on one)
};

class CallLimiter {
 public:
  explicit CallLimiter(CallLimits limits) : limits_(limits) {}

  // What a call holds while it runs; its place is given back when it is destroyed.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept { *this = std::move(other); }
    Ticket& operator=(Ticket&& other) noexcept;
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket();

   private:
    friend class CallLimiter;
    CallLimiter* limiter_ = nullptr;
    std::optional<std::string> user;
    std::string connection;
    bool stream = false;
  };

  // A call of `user` (a token's owner; nullopt under --insecure, where nobody is identified and
  // only the connection's cap applies) on `connection` (the peer, "ipv4:10.0.0.5:41234");
  // `stream`: the stream a call opens (the call holds a ticket of its own besides).
  // RESOURCE_EXHAUSTED past a cap.
  absl::StatusOr<Ticket> Admit(const std::optional<std::string>& user, const std::string& connection, bool stream);

  // In flight now (tests, metrics).
  int calls(const std::string& user) const;
  int streams(const std::string& user) const;

 private:
  void Release(const Ticket& ticket);

  const CallLimits limits_;
  mutable absl::Mutex mu_;
  std::map<std::string, int> calls_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> user_streams_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> connection_streams_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hetpool::daemon
