#include "src/daemon/security/call_limiter.h"

#include "absl/strings/str_cat.h"

namespace hetpool::daemon {
namespace {

// Counts go when they reach zero: a map of every user and connection ever seen would only grow.
void Decrement(std::map<std::string, int>& counts, const std::string& key) {
  auto it = counts.find(key);
  if (it != counts.end() && --it->second <= 0) counts.erase(it);
}

int Count(const std::map<std::string, int>& counts, const std::string& key) {
  auto it = counts.find(key);
  return it == counts.end() ? 0 : it->second;
}

}  // namespace

CallLimiter::Ticket& CallLimiter::Ticket::operator=(Ticket&& other) noexcept {
  if (this == &other) return *this;
  if (limiter_ != nullptr) limiter_->Release(*this);
  limiter_ = std::exchange(other.limiter_, nullptr);
  user = std::move(other.user);
  connection = std::move(other.connection);
  stream = other.stream;
  return *this;
}

CallLimiter::Ticket::~Ticket() {
  if (limiter_ != nullptr) limiter_->Release(*this);
}

absl::StatusOr<CallLimiter::Ticket> CallLimiter::Admit(const std::optional<std::string>& user,
                                                       const std::string& connection, bool stream) {
  if (!user && !stream) return Ticket();  // an anonymous call: no cap applies, nothing to count
  absl::MutexLock lock(&mu_);
  if (user && !stream && limits_.calls_per_user > 0 && Count(calls_, *user) >= limits_.calls_per_user) {
    return absl::ResourceExhaustedError(absl::StrCat(*user, " has ", limits_.calls_per_user,
                                                     " calls in flight, the most one user may (hetpoold "
                                                     "--max-calls-per-user); retry when some have ended"));
  }
  if (user && stream && limits_.streams_per_user > 0 && Count(user_streams_, *user) >= limits_.streams_per_user) {
    return absl::ResourceExhaustedError(absl::StrCat(*user, " has ", limits_.streams_per_user,
                                                     " streams open (watch, logs --follow), the most one user may "
                                                     "(hetpoold --max-streams-per-user); close some first"));
  }
  if (stream && limits_.streams_per_connection > 0 &&
      Count(connection_streams_, connection) >= limits_.streams_per_connection) {
    return absl::ResourceExhaustedError(absl::StrCat("this connection has ", limits_.streams_per_connection,
                                                     " streams open, the most one connection may (hetpoold "
                                                     "--max-streams-per-connection); close some first"));
  }
  if (stream) {
    if (user) ++user_streams_[*user];
    ++connection_streams_[connection];
  } else if (user) {
    ++calls_[*user];
  }
  Ticket ticket;
  ticket.limiter_ = this;
  ticket.user = user;
  ticket.connection = connection;
  ticket.stream = stream;
  return ticket;
}

void CallLimiter::Release(const Ticket& ticket) {
  absl::MutexLock lock(&mu_);
  if (ticket.stream) {
    if (ticket.user) Decrement(user_streams_, *ticket.user);
    Decrement(connection_streams_, ticket.connection);
  } else if (ticket.user) {
    Decrement(calls_, *ticket.user);
  }
}

int CallLimiter::calls(const std::string& user) const {
  absl::MutexLock lock(&mu_);
  return Count(calls_, user);
}

int CallLimiter::streams(const std::string& user) const {
  absl::MutexLock lock(&mu_);
  return Count(user_streams_, user);
}

}  // namespace hetpool::daemon
