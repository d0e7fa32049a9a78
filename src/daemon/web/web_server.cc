#include "src/daemon/web/web_server.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"
#include "src/daemon/web/web_assets.h"

namespace hetpool::daemon {
namespace {

// Everything the pages need comes from here: no inline script, no other origin, no framing.
const std::vector<std::pair<std::string, std::string>>& SecurityHeaders() {
  static const auto* headers = new std::vector<std::pair<std::string, std::string>>{
      {"Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"},
      {"X-Content-Type-Options", "nosniff"},
      {"Referrer-Policy", "no-referrer"},
      {"Cache-Control", "no-store"}};
  return *headers;
}

}  // namespace

WebServer::WebServer(std::shared_ptr<grpc::Channel> api) : gateway_(std::move(api)) {}

HttpReply WebServer::Handle(const HttpRequest& request) const {
  if (absl::StartsWith(request.path, "/api/")) {
    if (request.method != "GET" && request.method != "POST") return {405, "text/plain", "GET or POST\n"};
    return gateway_.Handle(request);
  }
  if (request.method != "GET" && request.method != "HEAD") return {405, "text/plain", "GET\n"};
  for (const WebAsset& asset : WebAssets()) {
    const std::string_view path = asset.path == "/index.html" ? "/" : asset.path;
    if (request.path == path) return {200, std::string(asset.content_type), std::string(asset.data)};
  }
  return {404, "text/plain", "Not Found\n"};
}

absl::StatusOr<std::unique_ptr<WebServer>> WebServer::Start(const WebOptions& options,
                                                            std::shared_ptr<grpc::Channel> api) {
  const size_t colon = options.listen.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(options.listen.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--http-listen ", options.listen, ": expected host:port"));
  }
  std::unique_ptr<WebServer> web(new WebServer(std::move(api)));
  HttpServerOptions http;
  http.host = options.listen.substr(0, colon);
  http.port = port;
  if (!options.insecure) {
    http.cert = options.tls.cert;
    http.key = options.tls.key;
  }
  http.headers = SecurityHeaders();
  const WebServer* self = web.get();
  auto server =
      HttpServer::Start(std::move(http), [self](const HttpRequest& request) { return self->Handle(request); });
  if (!server.ok())
    return absl::Status(server.status().code(), absl::StrCat("--http-listen: ", server.status().message()));
  web->server_ = *std::move(server);
  spdlog::info("dashboard on {}://{}:{}/", options.insecure ? "http" : "https", options.listen.substr(0, colon),
               web->server_->port());
  return web;
}

WebServer::~WebServer() = default;

int WebServer::port() const { return server_->port(); }

}  // namespace hetpool::daemon
