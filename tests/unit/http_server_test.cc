// The dashboard's HTTP server (src/daemon/web/http_server) against slow and idle clients (issue
// 60, item 7: 16 connections sending a header byte every 3 s kept every `/api/nodes` request
// waiting for 70 s). Serves on 127.0.0.1; the slow clients come from 127.0.0.2, another machine
// as far as the per-peer cap can tell.
#include "src/daemon/web/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace hetpool::daemon {
namespace {

// A TCP connection from `source` to 127.0.0.1:`port`; -1 when it cannot be made.
int Connect(int port, const char* source = "127.0.0.1") {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source, &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Whether the server closed `fd` within `patience` (a read returns end of file or an error).
bool ClosedBy(int fd, absl::Duration patience) {
  for (absl::Time deadline = absl::Now() + patience; absl::Now() < deadline;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) > 0) {
      char byte;
      const ssize_t n = ::recv(fd, &byte, 1, MSG_DONTWAIT);
      if (n <= 0) return true;
    }
  }
  return false;
}

// One request on a new connection; the whole answer ("" when none came within `patience`).
std::string Ask(int port, const std::string& request, absl::Duration patience = absl::Seconds(2)) {
  const int fd = Connect(port);
  if (fd < 0) return "";
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string answer;
  for (absl::Time deadline = absl::Now() + patience; absl::Now() < deadline;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    char chunk[4096];
    const ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
    if (n <= 0) break;
    answer.append(chunk, static_cast<size_t>(n));
  }
  ::close(fd);
  return answer;
}

HttpReply Echo(const HttpRequest& request) {
  std::string body = absl::StrCat(request.method, " ", request.path);
  for (const auto& [k, v] : request.query) absl::StrAppend(&body, " ", k, "=", v);
  absl::StrAppend(&body, " auth=", request.authorization.value_or("-"), " body=", request.body);
  return {200, "text/plain", body};
}

TEST(HttpServer, ParsesTheRequestHeadAndRefusesWhatItDoesNotTake) {
  auto head = ParseRequestHead(
      "GET /api/jobs%2Fx?state=running&name=a+b%21 HTTP/1.1\r\nAuthorization: Bearer t\r\nContent-Length: 3\r\n\r\n");
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->request.path, "/api/jobs/x");
  EXPECT_EQ(head->request.query.at("name"), "a b!");
  EXPECT_EQ(head->request.authorization, "Bearer t");
  EXPECT_EQ(head->content_length, 3u);
  EXPECT_TRUE(head->keep_alive);
  EXPECT_FALSE(ParseRequestHead("GET /x HTTP/1.0\r\n\r\n")->keep_alive);
  EXPECT_FALSE(ParseRequestHead("GET /x HTTP/1.1\r\nConnection: close\r\n\r\n")->keep_alive);
  EXPECT_FALSE(ParseRequestHead("GET x HTTP/1.1\r\n\r\n").ok());
  EXPECT_FALSE(ParseRequestHead("GET /%zz HTTP/1.1\r\n\r\n").ok());
  EXPECT_FALSE(ParseRequestHead("GET /a%00 HTTP/1.1\r\n\r\n").ok());
  EXPECT_FALSE(ParseRequestHead("POST /x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n").ok());
  EXPECT_TRUE(
      absl::IsUnimplemented(ParseRequestHead("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").status()));
}

TEST(HttpServer, AnswersKeepsConnectionsAliveAndRefusesBadRequests) {
  HttpServerOptions options;
  options.headers = {{"X-Test", "yes"}};
  options.max_body_bytes = 64;
  auto server = HttpServer::Start(options, Echo);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  const std::string one = Ask(port, "POST /p?q=1 HTTP/1.1\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
  EXPECT_TRUE(absl::StartsWith(one, "HTTP/1.1 200 OK\r\n")) << one;
  EXPECT_TRUE(absl::StrContains(one, "X-Test: yes\r\n")) << one;
  EXPECT_TRUE(absl::StrContains(one, "POST /p q=1 auth=- body=hello")) << one;
  // Two requests in one write on one connection (pipelined): two answers, in order.
  const std::string two = Ask(port, "GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\nConnection: close\r\n\r\n");
  EXPECT_LT(two.find("GET /a"), two.find("GET /b")) << two;
  EXPECT_TRUE(absl::StartsWith(Ask(port, "POST /p HTTP/1.1\r\nContent-Length: 999\r\n\r\n"), "HTTP/1.1 413"));
  EXPECT_TRUE(absl::StartsWith(Ask(port, "NOT HTTP\r\n\r\n"), "HTTP/1.1 400"));
}

TEST(HttpServer, SlowAndIdleClientsHoldNoWorkerAndAreClosedAtTheDeadline) {
  HttpServerOptions options;
  options.request_deadline = absl::Seconds(2);
  options.max_connections_per_peer = 16;
  options.workers = 2;
  auto server = HttpServer::Start(options, Echo);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  // 40 connections from another address: 16 taken (the peer's cap), the rest closed at once.
  std::vector<int> slow;
  for (int i = 0; i < 40; ++i) {
    const int fd = Connect(port, "127.0.0.2");
    if (fd < 0) GTEST_SKIP() << "cannot connect from 127.0.0.2 on this host";
    slow.push_back(fd);
  }
  int refused = 0;
  for (int fd : slow) refused += ClosedBy(fd, absl::Milliseconds(100)) ? 1 : 0;
  EXPECT_EQ(refused, 24) << "the per-peer cap";
  // The 16 drip a header byte at a time; every other client is answered meanwhile.
  const absl::Time started = absl::Now();
  for (int round = 0; round < 10; ++round) {
    for (int fd : slow) ::send(fd, round == 0 ? "GET / HTTP/1.1\r\n" : "X", round == 0 ? 16 : 1, MSG_NOSIGNAL);
    const absl::Time asked = absl::Now();
    const std::string answer = Ask(port, "GET /fast HTTP/1.1\r\nConnection: close\r\n\r\n");
    EXPECT_TRUE(absl::StrContains(answer, "GET /fast")) << "round " << round << ": " << answer;
    EXPECT_LT(absl::Now() - asked, absl::Seconds(1)) << "an answer waited behind slow clients";
    absl::SleepFor(absl::Milliseconds(300));  // the attack's pace: a byte per connection every 0.3 s, past the deadline
  }
  // Dripping does not buy time: each is closed by its deadline, 2 s after it connected.
  int closed = 0;
  for (int fd : slow) closed += ClosedBy(fd, absl::Seconds(10)) ? 1 : 0;
  EXPECT_EQ(closed, 40);
  EXPECT_LT(absl::Now() - started, absl::Seconds(15));
  // A connection that sends nothing at all goes the same way.
  const int idle = Connect(port);
  EXPECT_TRUE(ClosedBy(idle, absl::Seconds(10)));
  for (int fd : slow) ::close(fd);
  ::close(idle);
}

}  // namespace
}  // namespace hetpool::daemon
