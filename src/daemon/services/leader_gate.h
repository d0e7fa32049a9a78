// Whether this hetpoold may answer: always with one daemon; with several on etcd, only the
// elected leader once it has loaded the state. The others answer UNAVAILABLE with the leader's
// address, so agents and hetpoolctl (given every address) move on to it.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/support/status.h"
#include "src/common/grpc_status.h"

namespace hetpool::daemon {

class LeaderGate {
 public:
  // `leader`: the current leader's address, for the refusal message.
  explicit LeaderGate(bool open, std::function<std::string()> leader = {}) : open_(open), leader_(std::move(leader)) {}
  void Open() { open_ = true; }
  bool open() const { return open_.load(); }
  absl::Status Check() const {
    if (open_.load()) return absl::OkStatus();
    const std::string leader = leader_ ? leader_() : "";
    return absl::UnavailableError(leader.empty() ? "not the leader; no leader is elected yet"
                                                 : absl::StrCat("not the leader; the leader is at ", leader));
  }

 private:
  std::atomic<bool> open_;
  std::function<std::string()> leader_;
};

// First line of every RPC handler.
#define HETPOOL_RETURN_IF_NOT_LEADER(gate)                   \
  do {                                                       \
    if (absl::Status gate_status = (gate)->Check(); !gate_status.ok()) { \
      return ToGrpcStatus(gate_status);                      \
    }                                                        \
  } while (0)

}  // namespace hetpool::daemon
