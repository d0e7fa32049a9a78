// What a failed connection to hetpoold probably means, in words a user can act on: gRPC reports
// a TLS client meeting a plaintext daemon as "Ssl handshake failed ... wrong version number",
// the reverse as "Socket closed", a CA mismatch as "certificate verify failed". The raw text
// stays available to the caller for the curious.
#pragma once

#include <optional>
#include <string>

#include "grpcpp/support/status.h"

namespace hetpool::cli {

struct ConnectionSettings {
  std::string server;   // as given to --server
  bool insecure = false;
  std::string ca_file;  // --tls-ca / HETPOOL_TLS_CA; empty: the system roots
};

// nullopt when `status` is not a failure to reach the daemon (an answer from it, or a deadline
// on a call that did connect).
std::optional<std::string> ConnectionAdvice(const grpc::Status& status, const ConnectionSettings& settings);

}  // namespace hetpool::cli
