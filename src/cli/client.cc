#include "src/cli/client.h"

#include <cstdlib>
#include <iostream>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "src/cli/connection_advice.h"
#include "src/common/grpc_status.h"
#include "src/common/leader_words.h"

namespace hetpool::cli {

namespace {

// The leader among `servers` ("A,B,C"). Each is asked as a follower would ask it (the forwarded
// mark: a follower then answers for itself instead of passing the call on), and one that names
// the leader sends the next probe there: unary calls work through a follower, but streams
// (wait, watch, logs -f) only on the leader. With no leader found, the first replica that
// answered at all (it passes unary calls on once a leader is elected), else the first.
std::pair<std::shared_ptr<grpc::Channel>, std::string> PickServer(
    const std::string& servers, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const std::string& token) {
  std::vector<std::string> list = absl::StrSplit(servers, ',', absl::SkipWhitespace());
  if (list.size() <= 1) return {grpc::CreateChannel(servers, credentials), servers};
  std::optional<std::string> answered;
  std::set<std::string> asked;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string server = list[i];
    if (!asked.insert(server).second) continue;
    auto channel = grpc::CreateChannel(server, credentials);
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
    ctx.AddMetadata(kForwardedHeader, "1");
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    pb::ListFingerprintsResponse resp;
    const grpc::Status status =
        pb::ClusterService::NewStub(channel)->ListFingerprints(&ctx, pb::ListFingerprintsRequest(), &resp);
    // Any answer but UNAVAILABLE comes from the leader (or the only daemon): a viewer's
    // PERMISSION_DENIED included.
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
        status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
      return {channel, server};
    }
    const std::string said = status.error_message();  // a copy: error_message() returns one
    absl::string_view message = said;
    if (absl::ConsumePrefix(&message, kLeaderIsAt)) {
      if (!answered) answered = server;
      const std::string leader(message);
      if (!asked.contains(leader)) list.insert(list.begin() + static_cast<long>(i) + 1, leader);  // asked next
    } else if (absl::StartsWith(message, kNotTheLeader)) {
      if (!answered) answered = server;
    }
  }
  const std::string chosen = answered.value_or(list.front());
  return {grpc::CreateChannel(chosen, credentials), chosen};
}

}  // namespace

void Client::Reconnect() {
  channel_.reset();
  Connect();
}

bool Client::ShouldRetry(const grpc::Status& status, bool had_answers, absl::Time* unavailable_since) const {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return false;
  // A daemon never reached is a mistake to report at once (connection_advice.h); one that was
  // reached and went away, or a replica naming another, is a failover under way.
  const bool failover = had_answers || absl::StartsWith(status.error_message(), kNotTheLeader);
  if (!failover) return false;
  // The next connection tries the replica named as leader first, listed or not.
  const std::string said = status.error_message();  // a copy: error_message() returns one
  if (absl::string_view message = said; absl::ConsumePrefix(&message, kLeaderIsAt)) {
    leader_hint_ = std::string(message);
  }
  const absl::Time now = absl::Now();
  if (*unavailable_since == absl::InfiniteFuture()) *unavailable_since = now;
  if (now - *unavailable_since > kFailoverPatience) return false;
  absl::SleepFor(absl::Milliseconds(500));
  return true;
}

void Client::Connect() {
  if (channel_) return;
  absl::Status s = CheckTransportFlags(globals_.tls, globals_.insecure, /*cert_required=*/false);
  auto credentials = s.ok() ? MakeChannelCredentials(globals_.tls, globals_.insecure)
                            : absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>>(s);
  if (!credentials.ok()) {
    std::cerr << "hetpoolctl: " << credentials.status().message() << " (or set HETPOOL_TLS_CA / HETPOOL_INSECURE=1)\n";
    std::exit(kExitUsage);
  }
  std::tie(channel_, channel_server_) =
      PickServer(leader_hint_.empty() ? globals_.server : absl::StrCat(leader_hint_, ",", globals_.server),
                 *credentials, globals_.token);
  jobs_ = pb::JobService::NewStub(channel_);
  cluster_ = pb::ClusterService::NewStub(channel_);
  planner_ = pb::PlannerService::NewStub(channel_);
}

std::unique_ptr<grpc::ClientContext> Client::Context(absl::Duration timeout) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  if (!globals_.token.empty()) ctx->AddMetadata("authorization", "Bearer " + globals_.token);
  const absl::Duration t = timeout == absl::ZeroDuration() ? globals_.timeout : timeout;
  if (t != absl::InfiniteDuration()) ctx->set_deadline(absl::ToChronoTime(absl::Now() + t));
  return ctx;
}

int Error(const absl::Status& s) {
  std::cerr << "hetpoolctl: " << absl::StatusCodeToString(s.code()) << ": " << s.message() << "\n";
  return kExitError;
}

int Client::Failed(const grpc::Status& status) const {
  const std::string server = channel_server_.empty() ? globals_.server : channel_server_;
  const auto advice = ConnectionAdvice(status, {server, globals_.insecure, globals_.tls.ca,
                                                [](const std::string& address) { return AnswersTls(address); }});
  if (!advice) return Error(FromGrpcStatus(status));
  std::cerr << "hetpoolctl: " << *advice << " (gRPC: " << status.error_message() << ")\n";
  return kExitError;
}

int Usage(const std::string& message) {
  std::cerr << "hetpoolctl: " << message << " (see hetpoolctl --help)\n";
  return kExitUsage;
}

int CommandUsage(const std::string& command, const std::string& message) {
  std::cerr << "hetpoolctl: " << message << " (see hetpoolctl " << command << " --help)\n";
  return kExitUsage;
}

}  // namespace hetpool::cli
