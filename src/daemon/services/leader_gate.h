// Whether this hetpoold may answer: always with one daemon; with several on etcd, only the
// elected leader once it has loaded the state. The others pass unary API calls (reads and
// writes) on to the leader and relay its answer; agents' sessions and streaming calls they
// refuse with UNAVAILABLE and the leader's address, so agents and hetpoolctl (given every
// address) move on to it.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/server_context.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/support/status.h"
#include "src/common/grpc_status.h"
#include "src/common/leader_words.h"

namespace hetpool::daemon {

class LeaderGate {
 public:
  // `leader`: the current leader's address, for the refusal message ("" when none is known).
  // `credentials`: how this replica connects to the leader (the same TLS as every client).
  // `no_leader`: why none is known, for the refusal ("no leader is elected yet" when unset).
  explicit LeaderGate(bool open, std::function<std::string()> leader = {},
                      std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials(),
                      std::function<std::string()> no_leader = {})
      : open_(open),
        leader_(std::move(leader)),
        no_leader_(std::move(no_leader)),
        credentials_(std::move(credentials)) {}
  void Open() { open_ = true; }
  bool open() const { return open_.load(); }
  std::string leader() const { return leader_ ? leader_() : ""; }

  // A channel to the current leader (kept while the leader stays the same), or null.
  std::shared_ptr<grpc::Channel> LeaderChannel() const {
    const std::string address = leader();
    if (address.empty()) return nullptr;
    absl::MutexLock lock(&mu_);
    if (address != channel_address_) {
      channel_ = grpc::CreateChannel(address, credentials_);
      channel_address_ = address;
    }
    return channel_;
  }
  absl::Status Check() const {
    if (open_.load()) return absl::OkStatus();
    const std::string leader = leader_ ? leader_() : "";
    if (!leader.empty()) return absl::UnavailableError(absl::StrCat(kLeaderIsAt, leader));
    return absl::UnavailableError(absl::StrCat(kNotTheLeader, no_leader_ ? no_leader_() : "no leader is elected yet"));
  }

 private:
  std::atomic<bool> open_;
  std::function<std::string()> leader_;
  std::function<std::string()> no_leader_;
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  mutable absl::Mutex mu_;
  mutable std::string channel_address_ ABSL_GUARDED_BY(mu_);
  mutable std::shared_ptr<grpc::Channel> channel_ ABSL_GUARDED_BY(mu_);
};

// On a follower: calls `method` on the leader with the caller's request, deadline and bearer token
// (the leader authenticates and authorizes the caller itself), and relays the answer.
template <typename Service, typename Req, typename Resp>
grpc::Status ForwardToLeader(const LeaderGate& gate, grpc::ServerContext* server_ctx,
                             grpc::Status (Service::Stub::*method)(grpc::ClientContext*, const Req&, Resp*),
                             const Req& req, Resp* resp) {
  auto channel = gate.LeaderChannel();
  if (!channel || server_ctx->client_metadata().count(kForwardedHeader) > 0) return ToGrpcStatus(gate.Check());
  auto stub = Service::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(server_ctx->deadline());
  ctx.AddMetadata(kForwardedHeader, "1");
  if (auto it = server_ctx->client_metadata().find("authorization"); it != server_ctx->client_metadata().end()) {
    ctx.AddMetadata("authorization", std::string(it->second.data(), it->second.size()));
  }
  return ((*stub).*method)(&ctx, req, resp);
}

// First line of the RPC handlers a follower refuses (agents' sessions, streams).
#define HETPOOL_RETURN_IF_NOT_LEADER(gate)                               \
  do {                                                                   \
    if (absl::Status gate_status = (gate)->Check(); !gate_status.ok()) { \
      return ToGrpcStatus(gate_status);                                  \
    }                                                                    \
  } while (0)

// First line of the unary API handlers: serve here, or on the leader through this replica.
#define HETPOOL_SERVE_OR_FORWARD(gate, Service, Method, ctx, req, resp)                                       \
  do {                                                                                                        \
    if (!(gate)->open()) return ForwardToLeader<Service>(*(gate), ctx, &Service::Stub::Method, *(req), resp); \
  } while (0)

}  // namespace hetpool::daemon
