#include "src/daemon/web/web_server.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "spdlog/spdlog.h"
#include "src/daemon/web/web_assets.h"

namespace hetpool::daemon {
namespace {

void SecurityHeaders(httplib::Response& res) {
  // Everything the pages need comes from here: no inline script, no other origin, no framing.
  res.set_header("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("Cache-Control", "no-store");
}

}  // namespace

WebServer::WebServer(std::shared_ptr<grpc::Channel> api) : gateway_(std::move(api)) {}

absl::StatusOr<std::unique_ptr<WebServer>> WebServer::Start(const WebOptions& options,
                                                            std::shared_ptr<grpc::Channel> api) {
  const size_t colon = options.listen.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(options.listen.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("--http-listen ", options.listen, ": expected host:port"));
  }
  const std::string host = options.listen.substr(0, colon);
  std::unique_ptr<WebServer> web(new WebServer(std::move(api)));
  if (options.insecure) {
    web->server_ = std::make_unique<httplib::Server>();
  } else {
    auto tls = std::make_unique<httplib::SSLServer>(options.tls.cert.c_str(), options.tls.key.c_str());
    if (!tls->is_valid()) {
      return absl::InvalidArgumentError(absl::StrCat("--http-listen: cannot serve HTTPS with ", options.tls.cert));
    }
    web->server_ = std::move(tls);
  }
  httplib::Server& server = *web->server_;
  server.set_payload_max_length(1 << 20);
  for (const WebAsset& asset : WebAssets()) {
    const std::string path = asset.path == "/index.html" ? "/" : std::string(asset.path);
    server.Get(path, [&asset](const httplib::Request&, httplib::Response& res) {
      SecurityHeaders(res);
      res.set_content(std::string(asset.data), std::string(asset.content_type));
    });
  }
  ApiGateway* gateway = &web->gateway_;
  auto api_handler = [gateway](const httplib::Request& req, httplib::Response& res) {
    HttpRequest request;
    request.method = req.method;
    request.path = req.path;
    for (const auto& [key, value] : req.params) request.query[key] = value;
    request.body = req.body;
    if (req.has_header("Authorization")) request.authorization = req.get_header_value("Authorization");
    HttpReply reply = gateway->Handle(request);
    SecurityHeaders(res);
    res.status = reply.status;
    res.set_content(std::move(reply.body), reply.content_type);
  };
  server.Get(R"(/api/.*)", api_handler);
  server.Post(R"(/api/.*)", api_handler);
  if (port == 0) {
    port = server.bind_to_any_port(host);
  } else if (!server.bind_to_port(host, port)) {
    port = -1;
  }
  if (port <= 0) return absl::UnavailableError(absl::StrCat("--http-listen ", options.listen, ": cannot bind"));
  web->port_ = port;
  web->thread_ = std::thread([&server] { server.listen_after_bind(); });
  spdlog::info("dashboard on {}://{}:{}/", options.insecure ? "http" : "https", host, port);
  return web;
}

WebServer::~WebServer() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace hetpool::daemon
