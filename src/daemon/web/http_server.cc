#include "src/daemon/web/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "spdlog/spdlog.h"
#include "src/common/monotonic_clock.h"

namespace hetpool::daemon {
namespace {

// %XX decoded (and '+' as a space in a query). False for a bad escape or a NUL.
bool Decode(absl::string_view in, bool plus_is_space, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      int value = 0;
      if (i + 2 >= in.size() || !absl::ascii_isxdigit(in[i + 1]) || !absl::ascii_isxdigit(in[i + 2])) return false;
      for (char h : in.substr(i + 1, 2))
        value = value * 16 + (absl::ascii_isdigit(h) ? h - '0' : absl::ascii_tolower(h) - 'a' + 10);
      c = static_cast<char>(value);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      c = ' ';
    }
    if (c == '\0') return false;
    out->push_back(c);
  }
  return true;
}

const char* Reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Status";
  }
}

std::string PeerAddress(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (addr.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(addr).sin_addr, text, sizeof(text));
  } else if (addr.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr, text, sizeof(text));
  }
  return text;
}

}  // namespace

// The loop's record of a connection (named: HttpServer::Impl holds them).
namespace http_connection {

enum class Phase { kHandshake, kReading, kWorking };

struct Connection {
  int fd = -1;
  SSL* ssl = nullptr;
  std::string peer;  // the address alone: the cap is per machine, not per source port
  Phase phase = Phase::kHandshake;
  absl::Time deadline;  // monotonic: the whole request must be in by then
  std::string buffer;   // bytes read and not yet used
  std::optional<ParsedHead> head;
  std::optional<HttpReply> canned;  // an answer the loop decided (a bad request): no handler runs
};

}  // namespace http_connection

using http_connection::Connection;
using http_connection::Phase;

absl::StatusOr<ParsedHead> ParseRequestHead(absl::string_view head) {
  ParsedHead parsed;
  std::vector<absl::string_view> lines = absl::StrSplit(head, "\r\n");
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  if (lines.empty()) return absl::InvalidArgumentError("no request line");
  const std::vector<absl::string_view> first = absl::StrSplit(lines[0], ' ');
  if (first.size() != 3 || first[0].empty() || !absl::StartsWith(first[2], "HTTP/1.")) {
    return absl::InvalidArgumentError("the request line is not 'METHOD /path HTTP/1.x'");
  }
  parsed.request.method = std::string(first[0]);
  parsed.keep_alive = first[2] == "HTTP/1.1";
  const absl::string_view target = first[1];
  if (!absl::StartsWith(target, "/")) return absl::InvalidArgumentError("the request target is not a path");
  const size_t question = target.find('?');
  if (!Decode(target.substr(0, question), false, &parsed.request.path)) {
    return absl::InvalidArgumentError("the path has a bad %-escape");
  }
  if (question != absl::string_view::npos) {
    for (absl::string_view pair : absl::StrSplit(target.substr(question + 1), '&', absl::SkipEmpty())) {
      const size_t equals = pair.find('=');
      std::string key, value;
      if (!Decode(pair.substr(0, equals), true, &key) ||
          (equals != absl::string_view::npos && !Decode(pair.substr(equals + 1), true, &value))) {
        return absl::InvalidArgumentError("the query has a bad %-escape");
      }
      parsed.request.query[key] = value;
    }
  }
  std::optional<size_t> length;
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == absl::string_view::npos || colon == 0) return absl::InvalidArgumentError("a header line has no name");
    const std::string name = absl::AsciiStrToLower(lines[i].substr(0, colon));
    const absl::string_view value = absl::StripAsciiWhitespace(lines[i].substr(colon + 1));
    if (name == "content-length") {
      size_t n = 0;
      if (!absl::SimpleAtoi(value, &n) || (length && *length != n)) {
        return absl::InvalidArgumentError("Content-Length is not one number");
      }
      length = n;
    } else if (name == "transfer-encoding") {
      return absl::UnimplementedError("bodies in chunks are not taken: send Content-Length");
    } else if (name == "connection") {
      if (absl::EqualsIgnoreCase(value, "close")) parsed.keep_alive = false;
      if (absl::EqualsIgnoreCase(value, "keep-alive")) parsed.keep_alive = true;
    } else if (name == "authorization") {
      parsed.request.authorization = std::string(value);
    }
  }
  parsed.content_length = length.value_or(0);
  return parsed;
}

class HttpServer::Impl {
 public:
  Impl(HttpServerOptions options, HttpHandler handler) : options_(std::move(options)), handler_(std::move(handler)) {}
  ~Impl();
  absl::Status Listen();
  void StartThreads();
  int port() const { return port_; }

 private:
  void Loop();
  void Work();
  void Accept();
  void Advance(Connection& c);      // handshake, read, and hand a whole request to a worker
  bool ReadSome(Connection& c);     // false: the peer closed or failed
  void TakeRequest(Connection& c);  // a whole request in the buffer: to a worker
  void Dispatch(Connection& c);
  void Arm(Connection& c, uint32_t events, int op);
  void Close(int fd);
  void ExpireDeadlines();
  void TakeBackFromWorkers();
  bool WriteAll(Connection& c, const std::string& data);
  std::string Render(const HttpReply& reply, bool keep_alive) const;

  const HttpServerOptions options_;
  const HttpHandler handler_;
  SSL_CTX* tls_ = nullptr;
  int listen_fd_ = -1, epoll_fd_ = -1, wake_fd_ = -1;
  int port_ = 0;
  bool accept_paused_ = false;  // out of descriptors: no accepting until one closes
  // The loop's own: every connection (a working one too: the loop closes it when it is back).
  std::map<int, std::unique_ptr<Connection>> connections_;
  std::map<std::string, int> per_peer_;
  std::thread loop_;
  std::vector<std::thread> workers_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Connection*> ready_ ABSL_GUARDED_BY(mu_);              // whole requests, for workers
  std::deque<std::pair<int, bool>> returned_ ABSL_GUARDED_BY(mu_);  // (fd, keep it) from workers
};

HttpServer::Impl::~Impl() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
  }
  if (loop_.joinable()) loop_.join();
  for (auto& worker : workers_) worker.join();
  for (auto& [fd, c] : connections_) {
    if (c->ssl != nullptr) SSL_free(c->ssl);
    ::close(fd);
  }
  for (int fd : {listen_fd_, epoll_fd_, wake_fd_}) {
    if (fd >= 0) ::close(fd);
  }
  if (tls_ != nullptr) SSL_CTX_free(tls_);
}

absl::Status HttpServer::Impl::Listen() {
  // A peer that closes while an answer is written must not end the daemon.
  signal(SIGPIPE, SIG_IGN);
  if (!options_.cert.empty()) {
    tls_ = SSL_CTX_new(TLS_server_method());
    if (tls_ == nullptr) return absl::InternalError("cannot make a TLS context");
    SSL_CTX_set_min_proto_version(tls_, TLS1_2_VERSION);
    if (SSL_CTX_use_certificate_chain_file(tls_, options_.cert.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(tls_, options_.key.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(tls_) != 1) {
      return absl::InvalidArgumentError(absl::StrCat("cannot serve HTTPS with ", options_.cert, " and ", options_.key));
    }
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(options_.port);
  if (getaddrinfo(options_.host.empty() ? nullptr : options_.host.c_str(), service.c_str(), &hints, &found) != 0 ||
      found == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(options_.host, ": not an address to listen on"));
  }
  listen_fd_ = ::socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int yes = 1;
  if (listen_fd_ >= 0) setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  const bool bound =
      listen_fd_ >= 0 && ::bind(listen_fd_, found->ai_addr, found->ai_addrlen) == 0 && ::listen(listen_fd_, 256) == 0;
  const int error = errno;
  freeaddrinfo(found);
  if (!bound) return absl::ErrnoToStatus(error, absl::StrCat("listen on ", options_.host, ":", options_.port));
  sockaddr_storage local{};
  socklen_t length = sizeof(local);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&local), &length);
  port_ = ntohs(local.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(local).sin6_port
                                            : reinterpret_cast<sockaddr_in&>(local).sin_port);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0) return absl::ErrnoToStatus(errno, "epoll");
  for (int fd : {listen_fd_, wake_fd_}) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event);
  }
  return absl::OkStatus();
}

void HttpServer::Impl::StartThreads() {
  loop_ = std::thread([this] { Loop(); });
  for (int i = 0; i < std::max(1, options_.workers); ++i) workers_.emplace_back([this] { Work(); });
}

void HttpServer::Impl::Loop() {
  epoll_event events[64];
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    // A quarter second at most between looks at the deadlines.
    const int n = epoll_wait(epoll_fd_, events, 64, 250);
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listen_fd_) {
        Accept();
      } else if (fd == wake_fd_) {
        uint64_t count = 0;
        (void)!::read(wake_fd_, &count, sizeof(count));
        TakeBackFromWorkers();
      } else if (auto it = connections_.find(fd); it != connections_.end() && it->second->phase != Phase::kWorking) {
        Advance(*it->second);
      }
    }
    ExpireDeadlines();
  }
}

void HttpServer::Impl::Accept() {
  while (true) {
    sockaddr_storage addr{};
    socklen_t length = sizeof(addr);
    const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      if (errno == EMFILE || errno == ENFILE) {
        // The listening socket stays readable: stop looking at it until a connection closes.
        epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
        accept_paused_ = true;
      }
      return;
    }
    const std::string peer = PeerAddress(addr);
    if (static_cast<int>(connections_.size()) >= options_.max_connections ||
        per_peer_[peer] >= options_.max_connections_per_peer) {
      ::close(fd);  // past a cap: the peer is told nothing and holds nothing
      if (per_peer_[peer] == 0) per_peer_.erase(peer);
      continue;
    }
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    c->peer = peer;
    c->deadline = MonotonicNow() + options_.request_deadline;
    if (tls_ != nullptr) {
      c->ssl = SSL_new(tls_);
      SSL_set_fd(c->ssl, fd);
      SSL_set_accept_state(c->ssl);
      c->phase = Phase::kHandshake;
    } else {
      c->phase = Phase::kReading;
    }
    ++per_peer_[peer];
    Connection& added = *c;
    connections_[fd] = std::move(c);
    Arm(added, EPOLLIN, EPOLL_CTL_ADD);
  }
}

void HttpServer::Impl::Arm(Connection& c, uint32_t events, int op) {
  epoll_event event{};
  event.events = events;
  event.data.fd = c.fd;
  epoll_ctl(epoll_fd_, op, c.fd, &event);
}

void HttpServer::Impl::Advance(Connection& c) {
  if (c.phase == Phase::kHandshake) {
    ERR_clear_error();
    const int done = SSL_accept(c.ssl);
    if (done != 1) {
      const int error = SSL_get_error(c.ssl, done);
      if (error == SSL_ERROR_WANT_READ) return Arm(c, EPOLLIN, EPOLL_CTL_MOD);
      if (error == SSL_ERROR_WANT_WRITE) return Arm(c, EPOLLIN | EPOLLOUT, EPOLL_CTL_MOD);
      return Close(c.fd);  // not TLS, or a handshake that failed
    }
    c.phase = Phase::kReading;
    Arm(c, EPOLLIN, EPOLL_CTL_MOD);
  }
  if (!ReadSome(c)) return Close(c.fd);
  TakeRequest(c);
}

bool HttpServer::Impl::ReadSome(Connection& c) {
  char chunk[16384];
  const size_t most = options_.max_header_bytes + options_.max_body_bytes;
  while (c.buffer.size() <= most) {
    ssize_t n;
    if (c.ssl != nullptr) {
      ERR_clear_error();
      n = SSL_read(c.ssl, chunk, sizeof(chunk));
      if (n <= 0) {
        const int error = SSL_get_error(c.ssl, static_cast<int>(n));
        return error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE;
      }
    } else {
      n = ::recv(c.fd, chunk, sizeof(chunk), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
      if (n == 0) return false;
    }
    c.buffer.append(chunk, static_cast<size_t>(n));
  }
  return true;  // more than a request may hold: TakeRequest refuses it
}

void HttpServer::Impl::TakeRequest(Connection& c) {
  const auto refuse = [&](int status, absl::string_view why) {
    c.canned = HttpReply{status, "text/plain; charset=utf-8", absl::StrCat(why, "\n")};
    c.head = ParsedHead{};
    c.head->keep_alive = false;
    Dispatch(c);
  };
  if (!c.head) {
    const size_t end = c.buffer.find("\r\n\r\n");
    if (end == std::string::npos) {
      if (c.buffer.size() > options_.max_header_bytes) refuse(431, "the request's headers are too large");
      return;
    }
    if (end + 4 > options_.max_header_bytes) return refuse(431, "the request's headers are too large");
    auto head = ParseRequestHead(absl::string_view(c.buffer).substr(0, end + 4));
    if (!head.ok()) return refuse(absl::IsUnimplemented(head.status()) ? 411 : 400, head.status().message());
    if (head->content_length > options_.max_body_bytes) return refuse(413, "the request's body is too large");
    c.head = *std::move(head);
    c.buffer.erase(0, end + 4);
  }
  if (c.buffer.size() < c.head->content_length) return;
  c.head->request.body = c.buffer.substr(0, c.head->content_length);
  c.buffer.erase(0, c.head->content_length);  // what is left is the next request's beginning
  Dispatch(c);
}

void HttpServer::Impl::Dispatch(Connection& c) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
  c.phase = Phase::kWorking;
  absl::MutexLock lock(&mu_);
  ready_.push_back(&c);
}

void HttpServer::Impl::Work() {
  while (true) {
    Connection* c = nullptr;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](Impl* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) { return self->stopping_ || !self->ready_.empty(); },
          this));
      if (ready_.empty()) return;  // stopping
      c = ready_.front();
      ready_.pop_front();
    }
    const bool keep_alive = c->head->keep_alive && !c->canned;
    HttpReply reply = c->canned ? *c->canned : handler_(c->head->request);
    std::string out = Render(reply, keep_alive);
    if (c->head->request.method == "HEAD") out.resize(out.find("\r\n\r\n") + 4);
    // Written blocking, bounded: a peer that stops reading holds this worker the deadline at most.
    const timeval limit = absl::ToTimeval(options_.request_deadline);
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) & ~O_NONBLOCK);
    const bool written = WriteAll(*c, out);
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
    {
      absl::MutexLock lock(&mu_);
      returned_.emplace_back(c->fd, written && keep_alive);
    }
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
  }
}

bool HttpServer::Impl::WriteAll(Connection& c, const std::string& data) {
  size_t at = 0;
  while (at < data.size()) {
    ssize_t n;
    if (c.ssl != nullptr) {
      ERR_clear_error();
      n = SSL_write(c.ssl, data.data() + at, static_cast<int>(data.size() - at));
      if (n <= 0) return false;
    } else {
      n = ::send(c.fd, data.data() + at, data.size() - at, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
    }
    at += static_cast<size_t>(n);
  }
  return true;
}

void HttpServer::Impl::TakeBackFromWorkers() {
  std::deque<std::pair<int, bool>> back;
  {
    absl::MutexLock lock(&mu_);
    back.swap(returned_);
  }
  for (const auto& [fd, keep] : back) {
    auto it = connections_.find(fd);
    if (it == connections_.end()) continue;
    Connection& c = *it->second;
    if (!keep) {
      Close(fd);
      continue;
    }
    c.phase = Phase::kReading;
    c.head.reset();
    c.canned.reset();
    c.deadline = MonotonicNow() + options_.request_deadline;  // the next request, from now
    Arm(c, EPOLLIN, EPOLL_CTL_ADD);
    // Bytes already read (a pipelined request) or held decrypted by TLS raise no event.
    Advance(c);
  }
}

void HttpServer::Impl::ExpireDeadlines() {
  const absl::Time now = MonotonicNow();
  std::vector<int> late;
  for (const auto& [fd, c] : connections_) {
    if (c->phase != Phase::kWorking && now >= c->deadline) late.push_back(fd);
  }
  for (int fd : late) Close(fd);
}

void HttpServer::Impl::Close(int fd) {
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  Connection& c = *it->second;
  if (c.phase != Phase::kWorking) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  if (c.ssl != nullptr) SSL_free(c.ssl);
  ::close(fd);
  if (--per_peer_[c.peer] <= 0) per_peer_.erase(c.peer);
  connections_.erase(it);
  if (accept_paused_) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = listen_fd_;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &event);
    accept_paused_ = false;
  }
}

std::string HttpServer::Impl::Render(const HttpReply& reply, bool keep_alive) const {
  std::string out =
      absl::StrCat("HTTP/1.1 ", reply.status, " ", Reason(reply.status), "\r\nContent-Type: ", reply.content_type,
                   "\r\nContent-Length: ", reply.body.size(), "\r\n");
  for (const auto& [name, value] : options_.headers) absl::StrAppend(&out, name, ": ", value, "\r\n");
  absl::StrAppend(&out, "Connection: ", keep_alive ? "keep-alive" : "close", "\r\n\r\n", reply.body);
  return out;
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() = default;
int HttpServer::port() const { return impl_->port(); }

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options, HttpHandler handler) {
  auto impl = std::make_unique<Impl>(std::move(options), std::move(handler));
  if (absl::Status s = impl->Listen(); !s.ok()) return s;
  impl->StartThreads();
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

}  // namespace hetpool::daemon
