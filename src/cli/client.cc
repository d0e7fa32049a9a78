#include "src/cli/client.h"

#include <iostream>

#include "absl/strings/str_split.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "src/common/grpc_status.h"

namespace hetpool::cli {

namespace {

// With several daemon addresses (replicas on etcd), the one that answers: the leader. Followers
// refuse with UNAVAILABLE; when none answers, the first address (its error is what the user sees).
std::shared_ptr<grpc::Channel> PickServer(const std::string& servers) {
  const std::vector<std::string> list = absl::StrSplit(servers, ',', absl::SkipWhitespace());
  if (list.size() <= 1) return grpc::CreateChannel(servers, grpc::InsecureChannelCredentials());
  for (const std::string& server : list) {
    auto channel = grpc::CreateChannel(server, grpc::InsecureChannelCredentials());
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
    pb::ListFingerprintsResponse resp;
    if (pb::ClusterService::NewStub(channel)->ListFingerprints(&ctx, pb::ListFingerprintsRequest(), &resp).ok()) {
      return channel;
    }
  }
  return grpc::CreateChannel(list.front(), grpc::InsecureChannelCredentials());
}

}  // namespace

Client::Client(const Globals& g)
    : globals_(g),
      channel_(PickServer(g.server)),
      jobs_(pb::JobService::NewStub(channel_)),
      cluster_(pb::ClusterService::NewStub(channel_)),
      planner_(pb::PlannerService::NewStub(channel_)) {}

std::unique_ptr<grpc::ClientContext> Client::Context(absl::Duration timeout) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  const absl::Duration t = timeout == absl::ZeroDuration() ? globals_.timeout : timeout;
  if (t != absl::InfiniteDuration()) ctx->set_deadline(absl::ToChronoTime(absl::Now() + t));
  return ctx;
}

int Error(const absl::Status& s) {
  std::cerr << "hetpoolctl: " << absl::StatusCodeToString(s.code()) << ": " << s.message() << "\n";
  return kExitError;
}

int RpcError(const grpc::Status& s) { return Error(FromGrpcStatus(s)); }

int Usage(const std::string& message) {
  std::cerr << "hetpoolctl: " << message << " (see hetpoolctl --help)\n";
  return kExitUsage;
}

int ParseFlags(FlagSet& flags, const std::vector<std::string>& args, std::vector<std::string>* rest) {
  auto parsed = flags.Parse(args);
  if (parsed.ok()) {
    *rest = *std::move(parsed);
    return -1;
  }
  if (absl::IsCancelled(parsed.status())) {
    std::cout << parsed.status().message();
    return 0;
  }
  return Usage(std::string(parsed.status().message()));
}

}  // namespace hetpool::cli
