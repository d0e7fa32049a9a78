// What hetpoolctl says when it cannot reach hetpoold, for the messages gRPC 1.51 (Debian 12)
// actually gives in each case (taken from real runs against a TLS and a plaintext daemon).
#include "src/cli/connection_advice.h"

#include <gtest/gtest.h>

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
  const ConnectionSettings tls{"10.0.0.5:7070", false, "pki/ca.pem"}, plain{"10.0.0.5:7070", true, ""};
  const Case cases[] = {
      {"TLS client, plaintext daemon",
       {grpc::StatusCode::UNAVAILABLE, prefix + "UNKNOWN: ipv4:10.0.0.5:7070: Ssl handshake failed: SSL_ERROR_SSL: "
                                                "error:0A00010B:SSL routines::wrong version number"},
       tls, "hetpoold at 10.0.0.5:7070 speaks plaintext (it was started with --insecure); pass --insecure"},
      {"plaintext client, TLS daemon",
       {grpc::StatusCode::UNAVAILABLE, prefix + "UNAVAILABLE: ipv4:10.0.0.5:7070: Socket closed"},
       plain, "hetpoold at 10.0.0.5:7070 speaks TLS; drop --insecure"},
      {"another CA",
       {grpc::StatusCode::UNAVAILABLE, prefix + "UNKNOWN: ipv4:10.0.0.5:7070: Ssl handshake failed: SSL_ERROR_SSL: "
                                                "error:0A000086:SSL routines::certificate verify failed"},
       tls, "the CA in pki/ca.pem did not sign the certificate of hetpoold at 10.0.0.5:7070"},
      {"nothing listening",
       {grpc::StatusCode::UNAVAILABLE, prefix + "UNKNOWN: ipv4:10.0.0.5:7070: Failed to connect to remote host: Connection refused"},
       tls, "nothing accepts connections at 10.0.0.5:7070: is hetpoold running there?"},
      {"unknown host",
       {grpc::StatusCode::UNAVAILABLE, "DNS resolution failed for nohost.invalid:7070: C-ares status is not ARES_SUCCESS "
                                       "qtype=AAAA name=nohost.invalid is_balancer=0: Domain name not found"},
       {"nohost.invalid:7070", false, ""}, "cannot resolve the host of nohost.invalid:7070"},
      {"the daemon answered: no advice", {grpc::StatusCode::UNAUTHENTICATED, "no credentials"}, tls, ""},
      {"a follower refusing: no advice", {grpc::StatusCode::UNAVAILABLE, "not the leader; the leader is at x"}, tls, ""},
  };
  for (const Case& c : cases) {
    const auto advice = ConnectionAdvice(c.status, c.settings);
    if (c.advice.empty()) {
      EXPECT_FALSE(advice.has_value()) << c.what << ": " << *advice;
    } else {
      ASSERT_TRUE(advice.has_value()) << c.what;
      EXPECT_NE(advice->find(c.advice), std::string::npos) << c.what << ": " << *advice;
    }
  }
}

}  // namespace
}  // namespace hetpool::cli
