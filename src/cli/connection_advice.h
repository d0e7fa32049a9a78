// What a failed connection to hetpoold probably means, in words a user can act on: gRPC reports
// a TLS client meeting a plaintext daemon as "Ssl handshake failed ... wrong version number",
// the reverse as "Socket closed", a CA mismatch as "certificate verify failed". The raw text
// stays available to the caller for the curious.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "absl/time/time.h"

#include "grpcpp/support/status.h"

namespace hetpool::cli {

struct ConnectionSettings {
  std::string server;  // as given to --server
  bool insecure = false;
  std::string ca_file;  // --tls-ca / HETPOOL_TLS_CA; empty: the system roots
  // Whether `server` answers a TLS ClientHello as a TLS server does (AnswersTls below). A
  // closed connection is all a plaintext client sees of a TLS daemon, but it is also what a
  // daemon stopping or failing over does: TLS is named as the cause only when this says so.
  std::function<bool(const std::string& server)> answers_tls;
};

// Connects to `server` ("host:port") over TCP, sends a TLS ClientHello and says whether the
// first bytes back are a TLS record (a ServerHello or an alert), within `patience`.
bool AnswersTls(const std::string& server, absl::Duration patience = absl::Seconds(2));

// nullopt when `status` is not a failure to reach the daemon (an answer from it, or a deadline
// on a call that did connect).
std::optional<std::string> ConnectionAdvice(const grpc::Status& status, const ConnectionSettings& settings);

}  // namespace hetpool::cli
