// hetpoold's web dashboard (--http-listen): the pages (embedded in the binary, no CDN) and the
// JSON API (ApiGateway), over HTTPS with the daemon's certificate, or plain HTTP with --insecure,
// served by HttpServer (http_server.h: deadlines and caps against slow and idle clients).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/channel.h"
#include "src/common/tls.h"
#include "src/daemon/web/api_gateway.h"
#include "src/daemon/web/http_server.h"

namespace hetpool::daemon {

struct WebOptions {
  std::string listen;  // host:port; port 0 = any free one
  TlsFiles tls;        // cert and key for HTTPS (the daemon's)
  bool insecure = false;
};

class WebServer {
 public:
  // `api`: a channel to this daemon's own gRPC services (Server::InProcessChannel).
  static absl::StatusOr<std::unique_ptr<WebServer>> Start(const WebOptions& options,
                                                          std::shared_ptr<grpc::Channel> api);
  ~WebServer();
  int port() const;

 private:
  explicit WebServer(std::shared_ptr<grpc::Channel> api);
  // An asset, or the API; 404 and 405 otherwise.
  HttpReply Handle(const HttpRequest& request) const;

  ApiGateway gateway_;
  std::unique_ptr<HttpServer> server_;  // last: stopped first, while the gateway it calls lives
};

}  // namespace hetpool::daemon
