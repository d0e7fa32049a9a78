#include "src/cli/client.h"

#include <cstdlib>
#include <iostream>

#include "absl/strings/str_split.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "src/cli/connection_advice.h"
#include "src/common/grpc_status.h"

namespace hetpool::cli {

namespace {

// With several daemon addresses (replicas on etcd), the one that answers: the leader. Followers
// refuse with UNAVAILABLE; when none answers, the first address (its error is what the user sees).
std::shared_ptr<grpc::Channel> PickServer(const std::string& servers,
                                          const std::shared_ptr<grpc::ChannelCredentials>& credentials,
                                          const std::string& token) {
  const std::vector<std::string> list = absl::StrSplit(servers, ',', absl::SkipWhitespace());
  if (list.size() <= 1) return grpc::CreateChannel(servers, credentials);
  for (const std::string& server : list) {
    auto channel = grpc::CreateChannel(server, credentials);
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    pb::ListFingerprintsResponse resp;
    const grpc::Status status = pb::ClusterService::NewStub(channel)->ListFingerprints(&ctx, pb::ListFingerprintsRequest(), &resp);
    // Followers refuse nothing they can pass on, so any answer but UNAVAILABLE comes from a
    // replica that is up (a viewer's PERMISSION_DENIED included).
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
        status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
      return channel;
    }
  }
  return grpc::CreateChannel(list.front(), credentials);
}

}  // namespace

void Client::Connect() {
  if (channel_) return;
  absl::Status s = CheckTransportFlags(globals_.tls, globals_.insecure, /*cert_required=*/false);
  auto credentials = s.ok() ? MakeChannelCredentials(globals_.tls, globals_.insecure)
                            : absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>>(s);
  if (!credentials.ok()) {
    std::cerr << "hetpoolctl: " << credentials.status().message()
              << " (or set HETPOOL_TLS_CA / HETPOOL_INSECURE=1)\n";
    std::exit(kExitUsage);
  }
  channel_ = PickServer(globals_.server, *credentials, globals_.token);
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
  const auto advice =
      ConnectionAdvice(status, {globals_.server, globals_.insecure, globals_.tls.ca});
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
