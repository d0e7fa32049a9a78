#include "src/daemon/web/api_gateway.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "src/common/convert.h"

namespace hetpool::daemon {
namespace {

namespace pb = ::hetpool::v1;

constexpr size_t kLogTailBytes = 256 * 1024;
constexpr absl::Duration kCallTimeout = absl::Seconds(15);

HttpReply Json(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  HttpReply reply;
  (void)google::protobuf::util::MessageToJsonString(message, &reply.body, options);
  return reply;
}

HttpReply Error(int status, const std::string& code, const std::string& message) {
  HttpReply reply;
  reply.status = status;
  reply.body = nlohmann::json{{"code", code}, {"message", message}}.dump(-1, ' ', false,
                                                                         nlohmann::json::error_handler_t::replace);
  return reply;
}

HttpReply FromStatus(const grpc::Status& s) {
  return Error(HttpStatusOf(s.error_code()), absl::StatusCodeToString(static_cast<absl::StatusCode>(s.error_code())),
               s.error_message());
}

std::unique_ptr<grpc::ClientContext> Context(const HttpRequest& request) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + kCallTimeout));
  if (request.authorization) ctx->AddMetadata("authorization", *request.authorization);
  return ctx;
}

template <typename Resp, typename Call>
HttpReply Unary(const HttpRequest& request, Call call) {
  Resp resp;
  auto ctx = Context(request);
  grpc::Status s = call(ctx.get(), &resp);
  return s.ok() ? Json(resp) : FromStatus(s);
}

}  // namespace

int HttpStatusOf(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return 200;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE: return 400;
    case grpc::StatusCode::UNAUTHENTICATED: return 401;
    case grpc::StatusCode::PERMISSION_DENIED: return 403;
    case grpc::StatusCode::NOT_FOUND: return 404;
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::ABORTED: return 409;
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return 429;
    case grpc::StatusCode::UNAVAILABLE: return 503;
    case grpc::StatusCode::DEADLINE_EXCEEDED: return 504;
    default: return 500;
  }
}

ApiGateway::ApiGateway(std::shared_ptr<grpc::Channel> channel)
    : jobs_(pb::JobService::NewStub(channel)),
      cluster_(pb::ClusterService::NewStub(channel)),
      planner_(pb::PlannerService::NewStub(channel)) {}

HttpReply ApiGateway::Handle(const HttpRequest& request) const {
  const std::vector<std::string> parts = absl::StrSplit(request.path, '/', absl::SkipEmpty());
  if (parts.size() < 2 || parts[0] != "api") return Error(404, "NOT_FOUND", "no such API path: " + request.path);
  const std::string& what = parts[1];
  auto query = [&request](const std::string& key) {
    auto it = request.query.find(key);
    return it == request.query.end() ? std::string() : it->second;
  };
  if (request.method == "GET" && parts.size() == 2) {
    if (what == "nodes") {
      return Unary<pb::ListNodesResponse>(request, [&](grpc::ClientContext* c, pb::ListNodesResponse* r) {
        return cluster_->ListNodes(c, pb::ListNodesRequest(), r);
      });
    }
    if (what == "devices") {
      return Unary<pb::ListDevicesResponse>(request, [&](grpc::ClientContext* c, pb::ListDevicesResponse* r) {
        return cluster_->ListDevices(c, pb::ListDevicesRequest(), r);
      });
    }
    if (what == "fingerprints") {
      return Unary<pb::ListFingerprintsResponse>(request, [&](grpc::ClientContext* c, pb::ListFingerprintsResponse* r) {
        return cluster_->ListFingerprints(c, pb::ListFingerprintsRequest(), r);
      });
    }
    if (what == "jobs") {
      pb::ListJobsRequest req;  // newest first, a page at a time (`page_token` goes on)
      int limit = 100;
      if (const std::string text = query("limit"); !text.empty() && (!absl::SimpleAtoi(text, &limit) || limit < 1)) {
        return Error(400, "INVALID_ARGUMENT", "limit: not a positive number");
      }
      req.set_page_size(limit);
      req.set_newest_first(true);
      req.set_page_token(query("page_token"));
      if (const std::string state = query("state"); !state.empty()) {
        auto parsed = ParseJobState(state);
        if (!parsed.ok()) return Error(400, "INVALID_ARGUMENT", std::string(parsed.status().message()));
        req.add_states(*parsed);
      }
      req.set_user(query("user"));
      return Unary<pb::ListJobsResponse>(
          request, [&](grpc::ClientContext* c, pb::ListJobsResponse* r) { return jobs_->ListJobs(c, req, r); });
    }
    if (what == "usage") {
      pb::UsageRequest req;
      req.set_by(query("by"));
      return Unary<pb::UsageResponse>(
          request, [&](grpc::ClientContext* c, pb::UsageResponse* r) { return jobs_->GetUsage(c, req, r); });
    }
  }
  if (request.method == "GET" && what == "jobs" && parts.size() == 3) {
    pb::GetJobRequest req;
    req.set_job_id(parts[2]);
    return Unary<pb::Job>(request, [&](grpc::ClientContext* c, pb::Job* r) { return jobs_->GetJob(c, req, r); });
  }
  if (request.method == "GET" && what == "jobs" && parts.size() == 4 && parts[3] == "logs") {
    pb::GetJobLogsRequest req;
    req.set_job_id(parts[2]);
    if (const std::string rank = query("rank"); !rank.empty()) {
      int r = 0;
      if (!absl::SimpleAtoi(rank, &r)) return Error(400, "INVALID_ARGUMENT", "rank: not a number");
      req.set_rank(r);
    }
    auto ctx = Context(request);
    auto reader = jobs_->GetJobLogs(ctx.get(), req);
    std::string text;
    pb::LogChunk chunk;
    while (reader->Read(&chunk)) {
      text += chunk.data();
      if (text.size() > 2 * kLogTailBytes) text.erase(0, text.size() - kLogTailBytes);
    }
    grpc::Status s = reader->Finish();
    if (!s.ok()) return FromStatus(s);
    if (text.size() > kLogTailBytes) text.erase(0, text.size() - kLogTailBytes);
    HttpReply reply;
    reply.content_type = "text/plain; charset=utf-8";
    reply.body = std::move(text);
    return reply;
  }
  if (request.method == "POST" && what == "plan" && parts.size() == 2) {
    pb::PlanRequest req;
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = false;
    if (auto s = google::protobuf::util::JsonStringToMessage(request.body, &req, options); !s.ok()) {
      return Error(400, "INVALID_ARGUMENT", absl::StrCat("body: not a PlanRequest: ", s.message().as_string()));
    }
    return Unary<pb::PlanResponse>(
        request, [&](grpc::ClientContext* c, pb::PlanResponse* r) { return planner_->Plan(c, req, r); });
  }
  return Error(404, "NOT_FOUND", absl::StrCat("no such API call: ", request.method, " ", request.path));
}

}  // namespace hetpool::daemon
