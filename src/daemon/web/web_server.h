// hetpoold's web dashboard (--http-listen): the pages (embedded in the binary, no CDN) and the
// JSON API (ApiGateway), over HTTPS with the daemon's certificate, or plain HTTP with --insecure.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "grpcpp/channel.h"
#include "src/common/tls.h"
#include "src/daemon/web/api_gateway.h"

namespace httplib {
class Server;
}

namespace hetpool::daemon {

struct WebOptions {
  std::string listen;  // host:port; port 0 = any free one
  TlsFiles tls;        // cert and key for HTTPS (the daemon's)
  bool insecure = false;
};

class WebServer {
 public:
  // `api`: a channel to this daemon's own gRPC services (Server::InProcessChannel).
  static absl::StatusOr<std::unique_ptr<WebServer>> Start(const WebOptions& options, std::shared_ptr<grpc::Channel> api);
  ~WebServer();
  int port() const { return port_; }

 private:
  explicit WebServer(std::shared_ptr<grpc::Channel> api);  // out of line: httplib::Server is incomplete here

  ApiGateway gateway_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace hetpool::daemon
