// The dashboard's HTTP/1.1 server (HTTPS with the daemon's certificate, or plain with
// --insecure), for small requests and whole answers. Built for a hostile network (issue 60,
// item 7): 16 TLS connections sending a header byte every 3 s held every worker of the library
// server it replaced (a fixed pool of 8 doing the handshake and reading headers, each read with
// its own timeout) and kept every `/api/nodes` request waiting for 70 s. Here:
//   - one thread reads every connection without blocking, and the TLS handshake, request line,
//     headers and body must all arrive within `request_deadline` of the connection's start (or
//     of the last answer on a kept-alive one), whatever the pace of the bytes;
//   - workers see whole requests only: a slow or idle socket holds no worker;
//   - connections are capped per peer address and in all: past either, closed at accept.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/daemon/web/api_gateway.h"

namespace hetpool::daemon {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free one
  // HTTPS with this certificate chain and key (PEM files); both empty: plain HTTP.
  std::string cert, key;
  absl::Duration request_deadline = absl::Seconds(10);
  int max_connections = 512;
  int max_connections_per_peer = 16;
  size_t max_header_bytes = 16 << 10;
  size_t max_body_bytes = 1 << 20;
  int workers = 4;
  // Sent with every answer (the dashboard's security headers).
  std::vector<std::pair<std::string, std::string>> headers;
};

using HttpHandler = std::function<HttpReply(const HttpRequest&)>;

class HttpServer {
 public:
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(HttpServerOptions options, HttpHandler handler);
  ~HttpServer();  // stops: closes every connection, joins its threads
  int port() const;

  class Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Parses what is in `head` (the bytes up to and with the blank line): the request line and the
// headers the server acts on, the path and query percent-decoded. INVALID_ARGUMENT saying what
// is wrong. `content_length` and `keep_alive` are set from the headers.
struct ParsedHead {
  HttpRequest request;
  size_t content_length = 0;
  bool keep_alive = true;
};
absl::StatusOr<ParsedHead> ParseRequestHead(absl::string_view head);

}  // namespace hetpool::daemon
