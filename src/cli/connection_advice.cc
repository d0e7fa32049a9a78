#include "src/cli/connection_advice.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <iterator>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace hetpool::cli {

bool AnswersTls(const std::string& server, absl::Duration patience) {
  const size_t colon = server.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = server.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), server.substr(colon + 1).c_str(), &hints, &found) != 0 || found == nullptr)
    return false;
  const int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  bool tls = false;
  if (fd >= 0) {
    timeval wait{};
    wait.tv_sec = absl::ToInt64Seconds(patience);
    wait.tv_usec = absl::ToInt64Microseconds(patience % absl::Seconds(1));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof(wait));
    // A TLS 1.2 ClientHello such as a TLS server takes far enough to answer: a ServerHello or a
    // handshake alert (record type 0x16 or 0x15, version 3.x). An HTTP/2 server answers with a
    // frame, or closes.
    std::vector<unsigned char> body = {0x03, 0x03};                                      // TLS 1.2
    for (int i = 0; i < 32; ++i) body.push_back(static_cast<unsigned char>(i * 7 + 1));  // random
    body.push_back(0x00);                                                                // no session id
    const unsigned char suites[] = {0x00, 0x08, 0xc0, 0x2f, 0xc0, 0x2b, 0xc0, 0x30, 0x00, 0x9c};
    body.insert(body.end(), std::begin(suites), std::end(suites));
    body.insert(body.end(), {0x01, 0x00});  // no compression
    const unsigned char extensions[] = {
        0x00, 0x0a, 0x00, 0x06, 0x00, 0x04, 0x00, 0x1d, 0x00, 0x17,              // groups: x25519, P-256
        0x00, 0x0b, 0x00, 0x02, 0x01, 0x00,                                      // point formats
        0x00, 0x0d, 0x00, 0x08, 0x00, 0x06, 0x08, 0x04, 0x04, 0x01, 0x04, 0x03,  // signature algorithms
        0x00, 0x10, 0x00, 0x05, 0x00, 0x03, 0x02, 'h',  '2'};                    // ALPN h2
    body.push_back(0x00);
    body.push_back(sizeof(extensions));
    body.insert(body.end(), std::begin(extensions), std::end(extensions));
    std::vector<unsigned char> hello = {0x16,
                                        0x03,
                                        0x01,
                                        static_cast<unsigned char>((body.size() + 4) >> 8),
                                        static_cast<unsigned char>((body.size() + 4) & 0xff),
                                        0x01,
                                        0x00,
                                        static_cast<unsigned char>(body.size() >> 8),
                                        static_cast<unsigned char>(body.size() & 0xff)};
    hello.insert(hello.end(), body.begin(), body.end());
    unsigned char answer[3] = {};
    if (connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
        send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(hello.size()) &&
        recv(fd, answer, sizeof(answer), MSG_WAITALL) == static_cast<ssize_t>(sizeof(answer))) {
      tls = (answer[0] == 0x16 || answer[0] == 0x15) && answer[1] == 0x03;
    }
    close(fd);
  }
  freeaddrinfo(found);
  return tls;
}

std::optional<std::string> ConnectionAdvice(const grpc::Status& status, const ConnectionSettings& s) {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return std::nullopt;
  const std::string m = absl::AsciiStrToLower(status.error_message());
  auto has = [&m](const char* text) { return absl::StrContains(m, text); };  // `text` in lower case
  const std::string at = absl::StrCat("hetpoold at ", s.server);
  if (has("certificate verify failed")) {
    return absl::StrCat("the CA in ", s.ca_file.empty() ? "the system's trust store" : s.ca_file,
                        " did not sign the certificate of ", at, "; pass the CA that did (--tls-ca or HETPOOL_TLS_CA)");
  }
  if (has("not in peer certificate") || has("hostname mismatch")) {
    return absl::StrCat("the certificate of ", at, " does not name ", s.server,
                        "; connect by a name or address it lists (deploy/pki.sh server ... SAN)");
  }
  if (has("wrong version number") || (has("handshake failed") && !s.insecure)) {
    return absl::StrCat(
        at, " speaks plaintext (it was started with --insecure); pass --insecure or set HETPOOL_INSECURE=1");
  }
  const bool closed = has("socket closed") || has("connection reset");
  if (s.insecure && closed && s.answers_tls && s.answers_tls(s.server)) {
    return absl::StrCat(at, " speaks TLS; drop --insecure and pass its CA with --tls-ca or HETPOOL_TLS_CA");
  }
  if (closed) {
    return absl::StrCat(at,
                        " closed the connection: is it stopping or failing over? (with several replicas, give "
                        "them all to --server)");
  }
  if (has("connection refused")) {
    return absl::StrCat("nothing accepts connections at ", s.server,
                        ": is hetpoold running there? (--server or HETPOOL_SERVER; default 127.0.0.1:7070)");
  }
  if (has("dns resolution failed") || has("domain name not found")) {
    return absl::StrCat("cannot resolve the host of ", s.server, " (--server or HETPOOL_SERVER)");
  }
  if (has("failed to connect")) return absl::StrCat("cannot reach ", at, ": is it running?");
  return std::nullopt;
}

}  // namespace hetpool::cli
