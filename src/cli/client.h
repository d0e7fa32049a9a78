// What every hetpoolctl command shares: global flags, the connection to hetpoold, and the way
// errors and usage mistakes are reported (one line on stderr, a distinct exit code).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "hetpool/v1/cluster.grpc.pb.h"
#include "hetpool/v1/job.grpc.pb.h"
#include "hetpool/v1/planner.grpc.pb.h"
#include "src/common/tls.h"

namespace hetpool::cli {

namespace pb = ::hetpool::v1;

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;
constexpr int kExitJobFailed = 3;       // the job failed by its own doing
constexpr int kExitInfrastructure = 4;  // the job failed because of nodes, processes or launches
constexpr int kExitJobCancelled = 5;
constexpr int kExitTimeout = 124;

struct Globals {
  std::string server = "127.0.0.1:7070";
  std::string output = "table";
  absl::Duration timeout = absl::Seconds(30);
  std::string token;  // bearer token sent with every call
  TlsFiles tls;       // the CA (and an optional client certificate)
  bool insecure = false;
};

// Connects on first use, so commands that need no daemon (admin, offline plan) need no TLS
// setup either; a connection that cannot be set up ends the program with the reason.
class Client {
 public:
  explicit Client(const Globals& g) : globals_(g) {}

  std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout = absl::ZeroDuration()) const;
  pb::JobService::Stub& jobs() { return Connect(), *jobs_; }
  pb::ClusterService::Stub& cluster() { return Connect(), *cluster_; }
  pb::PlannerService::Stub& planner() { return Connect(), *planner_; }
  bool json() const { return globals_.output == "json"; }
  bool has_token() const { return !globals_.token.empty(); }
  bool csv() const { return globals_.output == "csv"; }
  // Prints a failed call on stderr, one line, and returns the exit code. A daemon that cannot be
  // reached gets what is probably wrong and what to do (connection_advice.h) before gRPC's words.
  int Failed(const grpc::Status& status) const;

  // Picks the server again (the leader among --server's replicas: client.cc's PickServer).
  void Reconnect();
  // For streams that should ride through a failover (wait, watch, logs -f): after a call that
  // ended `status`, whether to call again (after a short pause; then Reconnect()). Only an
  // UNAVAILABLE from a replica that names another, or after the stream had answered
  // (`had_answers`), and for at most kFailoverPatience of such answers in a row
  // (`*unavailable_since`: InfiniteFuture before the first, reset by the caller on an answer).
  bool ShouldRetry(const grpc::Status& status, bool had_answers, absl::Time* unavailable_since) const;
  static constexpr absl::Duration kFailoverPatience = absl::Seconds(60);

 private:
  void Connect();

  Globals globals_;
  mutable std::string leader_hint_;  // the leader a replica named (ShouldRetry), asked first
  std::shared_ptr<grpc::Channel> channel_;
  std::string channel_server_;  // the address channel_ goes to
  std::unique_ptr<pb::JobService::Stub> jobs_;
  std::unique_ptr<pb::ClusterService::Stub> cluster_;
  std::unique_ptr<pb::PlannerService::Stub> planner_;
};

// Print one line on stderr and return the exit code.
int Error(const absl::Status& s);
int Usage(const std::string& message);
// A usage mistake in one command's line: points at that command's help.
int CommandUsage(const std::string& command, const std::string& message);

}  // namespace hetpool::cli
