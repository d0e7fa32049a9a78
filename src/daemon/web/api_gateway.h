// The dashboard's JSON API, as a gateway onto hetpoold's own gRPC services: each HTTP request
// becomes one call on an in-process channel carrying the caller's bearer token, so the web pages
// get exactly the API's authentication, roles, audit, validation and leader forwarding, with no
// second implementation of any of them. No HTTP library here: WebServer adapts it.
//
//   GET  /api/nodes                 ClusterService.ListNodes
//   GET  /api/devices               ClusterService.ListDevices
//   GET  /api/fingerprints          ClusterService.ListFingerprints
//   GET  /api/jobs[?state=running&limit=100&page_token=T]
//                                   JobService.ListJobs, newest first, a page (a user sees their own)
//   GET  /api/jobs/ID               JobService.GetJob
//   GET  /api/jobs/ID/logs[?rank=R] JobService.GetJobLogs, the last 256 KiB as text
//   GET  /api/usage[?by=user]       JobService.GetUsage over the last 7 days
//   POST /api/plan                  PlannerService.Plan (body: PlanRequest as JSON)
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "grpcpp/channel.h"
#include "hetpool/v1/cluster.grpc.pb.h"
#include "hetpool/v1/job.grpc.pb.h"
#include "hetpool/v1/planner.grpc.pb.h"

namespace hetpool::daemon {

struct HttpRequest {
  std::string method;  // GET, POST
  std::string path;    // /api/jobs/job-000001
  std::map<std::string, std::string> query;
  std::string body;
  std::optional<std::string> authorization;  // the Authorization header, passed on as is
};

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

class ApiGateway {
 public:
  explicit ApiGateway(std::shared_ptr<grpc::Channel> channel);
  HttpReply Handle(const HttpRequest& request) const;

 private:
  std::unique_ptr<hetpool::v1::JobService::Stub> jobs_;
  std::unique_ptr<hetpool::v1::ClusterService::Stub> cluster_;
  std::unique_ptr<hetpool::v1::PlannerService::Stub> planner_;
};

// gRPC status code -> HTTP status (INVALID_ARGUMENT 400, UNAUTHENTICATED 401, ...).
int HttpStatusOf(grpc::StatusCode code);

}  // namespace hetpool::daemon
