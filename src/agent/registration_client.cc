#include "src/agent/registration_client.h"

#include <algorithm>
#include <utility>

#include "absl/strings/strip.h"
#include "spdlog/spdlog.h"
#include "src/common/leader_words.h"

namespace hetpool::agent {

namespace pb = ::hetpool::v1;

std::unique_ptr<DaemonLink> RegistrationClient::Register(const pb::RegisterRequest& req, pb::RegisterResponse* resp,
                                                         grpc::Status* status_out) {
  last_index_ = index_ % servers_.size();
  const std::string& server = servers_[last_index_];
  std::unique_ptr<DaemonLink> link = dialer_->Dial(server);
  unreachable_ = false;
  const grpc::Status status = link->Register(req, resp);
  if (status_out != nullptr) *status_out = status;
  if (status.ok()) {
    leader_hops_ = 0;
    backoff_ = kFirstBackoff;
    return link;
  }
  spdlog::warn("register with {} failed: {}", server, status.error_message());
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
      status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    // Not reached (or too slow): say so, unless the connection stands (the daemon itself
    // answered UNAVAILABLE, a follower or one whose store refuses writes).
    unreachable_ = !link->Connected();
    index_ = last_index_ + 1;  // try the next daemon address
    FollowLeaderNamedIn(status.error_message());
  }
  return nullptr;
}

void RegistrationClient::FollowLeaderNamedIn(const std::string& said) {
  // A follower names the leader: go there next, at once, rather than around the list with a
  // growing wait (that took 12-14 s of a 15 s lease).
  absl::string_view message = said;
  if (!absl::ConsumePrefix(&message, kLeaderIsAt)) return;
  const auto named = std::find(servers_.begin(), servers_.end(), message);
  if (named == servers_.end() || leader_hops_ >= servers_.size()) return;
  index_ = static_cast<size_t>(named - servers_.begin());
  leader_named_ = true;
  ++leader_hops_;
}

void RegistrationClient::WaitBeforeNextTry(const std::function<bool()>& tick) {
  const std::string* address = unreachable_ ? &servers_[index_ % servers_.size()] : nullptr;
  if (std::exchange(leader_named_, false)) {
    dialer_->Wait(address, loop_period_, loop_period_, tick);  // the named leader next, without backing off
    return;
  }
  leader_hops_ = 0;
  dialer_->Wait(address, backoff_, loop_period_, tick);
  backoff_ = std::min(backoff_ * 2, kMaxBackoff);
}

}  // namespace hetpool::agent
