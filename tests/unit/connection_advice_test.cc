// What hetpoolctl says when it cannot reach hetpoold, for the messages gRPC 1.51 (Debian 12)
// actually gives in each case (taken from real runs against a TLS and a plaintext daemon).
#include "src/cli/connection_advice.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "absl/strings/match.h"

namespace hetpool::cli {
namespace {

TEST(ConnectionAdvice, SaysWhatIsProbablyWrong) {
  const std::string prefix = "failed to connect to all addresses; last error: ";
  struct Case {
    const char* what;
    grpc::Status status;
    ConnectionSettings settings;
    std::string advice;  // empty: none
  };
  const auto answers_tls = [](const std::string&) { return true; };
  const auto answers_plain = [](const std::string&) { return false; };
  const ConnectionSettings tls{"10.0.0.5:7070", false, "pki/ca.pem", answers_tls},
      plain{"10.0.0.5:7070", true, "", answers_tls}, plain_to_plain{"10.0.0.5:7070", true, "", answers_plain};
  const Case cases[] = {
      {"TLS client, plaintext daemon",
       {grpc::StatusCode::UNAVAILABLE, prefix + "UNKNOWN: ipv4:10.0.0.5:7070: Ssl handshake failed: SSL_ERROR_SSL: "
                                                "error:0A00010B:SSL routines::wrong version number"},
       tls,
       "hetpoold at 10.0.0.5:7070 speaks plaintext (it was started with --insecure); pass --insecure"},
      {"plaintext client, TLS daemon",
       {grpc::StatusCode::UNAVAILABLE, prefix + "UNAVAILABLE: ipv4:10.0.0.5:7070: Socket closed"},
       plain,
       "hetpoold at 10.0.0.5:7070 speaks TLS; drop --insecure"},
      // Issue 45, item 4: a daemon that stops (a failover) closes the connection too; without a
      // TLS answer seen, TLS is not named.
      {"plaintext client, daemon going away",
       {grpc::StatusCode::UNAVAILABLE, prefix + "UNAVAILABLE: ipv4:10.0.0.5:7070: Socket closed"},
       plain_to_plain,
       "hetpoold at 10.0.0.5:7070 closed the connection: is it stopping or failing over?"},
      {"another CA",
       {grpc::StatusCode::UNAVAILABLE, prefix + "UNKNOWN: ipv4:10.0.0.5:7070: Ssl handshake failed: SSL_ERROR_SSL: "
                                                "error:0A000086:SSL routines::certificate verify failed"},
       tls,
       "the CA in pki/ca.pem did not sign the certificate of hetpoold at 10.0.0.5:7070"},
      {"nothing listening",
       {grpc::StatusCode::UNAVAILABLE,
        prefix + "UNKNOWN: ipv4:10.0.0.5:7070: Failed to connect to remote host: Connection refused"},
       tls,
       "nothing accepts connections at 10.0.0.5:7070: is hetpoold running there?"},
      {"unknown host",
       {grpc::StatusCode::UNAVAILABLE,
        "DNS resolution failed for nohost.invalid:7070: C-ares status is not ARES_SUCCESS "
        "qtype=AAAA name=nohost.invalid is_balancer=0: Domain name not found"},
       {"nohost.invalid:7070", false, ""},
       "cannot resolve the host of nohost.invalid:7070"},
      {"the daemon answered: no advice", {grpc::StatusCode::UNAUTHENTICATED, "no credentials"}, tls, ""},
      {"a follower refusing: no advice",
       {grpc::StatusCode::UNAVAILABLE, "not the leader; the leader is at x"},
       tls,
       ""},
  };
  for (const Case& c : cases) {
    const auto advice = ConnectionAdvice(c.status, c.settings);
    if (advice) {
      EXPECT_EQ(absl::StrContains(*advice, "speaks TLS"), absl::StrContains(c.advice, "speaks TLS"))
          << c.what << ": " << *advice;
    }
    if (c.advice.empty()) {
      EXPECT_FALSE(advice.has_value()) << c.what << ": " << *advice;
    } else {
      ASSERT_TRUE(advice.has_value()) << c.what;
      EXPECT_NE(advice->find(c.advice), std::string::npos) << c.what << ": " << *advice;
    }
  }
}

// The probe against real sockets on 127.0.0.1: a listener that answers with a TLS record, and one
// that closes at once (as a daemon going away does).
TEST(ConnectionAdvice, TheTlsProbeTellsATlsAnswerFromAClosedConnection) {
  for (const bool tls : {true, false}) {
    const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(listener, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    ASSERT_EQ(listen(listener, 1), 0);
    ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
    std::thread server([listener, tls] {
      const int peer = accept(listener, nullptr, nullptr);
      if (peer < 0) return;
      char hello[512];
      (void)recv(peer, hello, sizeof(hello), 0);
      const unsigned char alert[] = {0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28};
      if (tls) (void)send(peer, alert, sizeof(alert), MSG_NOSIGNAL);
      close(peer);
    });
    EXPECT_EQ(AnswersTls("127.0.0.1:" + std::to_string(ntohs(address.sin_port))), tls);
    server.join();
    close(listener);
  }
}

}  // namespace
}  // namespace hetpool::cli
