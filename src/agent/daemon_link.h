// The agent's calls to hetpoold, behind an interface so that the session's parts are tested
// with a fake daemon (no network): one DaemonLink per registered session (its unary calls and
// its order stream), made by a DaemonDialer that also waits for an address to connect.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/status.h"
#include "hetpool/v1/agent.pb.h"

namespace hetpool::agent {

// What the order stream brought while the session waited.
struct OrdersUpdate {
  std::optional<hetpool::v1::Orders> orders;  // the newest whole set, if one came
  bool ended = false;                         // the stream ended: register again
  std::string end_message;
};

class DaemonLink {
 public:
  virtual ~DaemonLink() = default;
  virtual grpc::Status Register(const hetpool::v1::RegisterRequest& req, hetpool::v1::RegisterResponse* resp) = 0;
  virtual grpc::Status Heartbeat(const hetpool::v1::HeartbeatRequest& req, hetpool::v1::HeartbeatResponse* resp) = 0;
  virtual grpc::Status PushLogs(const hetpool::v1::PushLogsRequest& req, hetpool::v1::PushLogsResponse* resp) = 0;
  // Starts following the session's orders; sets are taken only whole (OrdersAssembler).
  virtual void FollowOrders(const hetpool::v1::StreamOrdersRequest& req) = 0;
  // Waits at most `patience` for a new set or the stream's end.
  virtual OrdersUpdate AwaitOrders(absl::Duration patience) = 0;
  // Ends the current (or next) AwaitOrders early, from any thread: something else needs the
  // loop (a job process ended).
  virtual void Wake() {}
  // Whether the connection stands now: a daemon that answers UNAVAILABLE (a follower, a store
  // refusing writes) was reached; one that could not be connected to was not.
  virtual bool Connected() = 0;
};

class DaemonDialer {
 public:
  virtual ~DaemonDialer() = default;
  virtual std::unique_ptr<DaemonLink> Dial(const std::string& address) = 0;
  // Waits `patience`, calling `tick` every `period` (false: stop waiting), and ends early once
  // `address` connects when one is given (daemon_channel.h's WaitForDaemon).
  virtual void Wait(const std::string* address, absl::Duration patience, absl::Duration period,
                    const std::function<bool()>& tick) = 0;
};

// Over gRPC, with the node's credentials. The channel to an address is kept while the address
// does not change, so the wait for it to connect and the registration share one connection.
std::unique_ptr<DaemonDialer> MakeGrpcDaemonDialer(std::shared_ptr<grpc::ChannelCredentials> credentials);

}  // namespace hetpool::agent
