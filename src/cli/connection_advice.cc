#include "src/cli/connection_advice.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace hetpool::cli {

std::optional<std::string> ConnectionAdvice(const grpc::Status& status, const ConnectionSettings& s) {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE) return std::nullopt;
  const std::string m = absl::AsciiStrToLower(status.error_message());
  auto has = [&m](const char* text) { return absl::StrContains(m, text); };  // `text` in lower case
  const std::string at = absl::StrCat("hetpoold at ", s.server);
  if (has("certificate verify failed")) {
    return absl::StrCat("the CA in ", s.ca_file.empty() ? "the system's trust store" : s.ca_file,
                        " did not sign the certificate of ", at,
                        "; pass the CA that did (--tls-ca or HETPOOL_TLS_CA)");
  }
  if (has("not in peer certificate") || has("hostname mismatch")) {
    return absl::StrCat("the certificate of ", at, " does not name ", s.server,
                        "; connect by a name or address it lists (deploy/pki.sh server ... SAN)");
  }
  if (has("wrong version number") || (has("handshake failed") && !s.insecure)) {
    return absl::StrCat(at, " speaks plaintext (it was started with --insecure); pass --insecure or set HETPOOL_INSECURE=1");
  }
  if (s.insecure && (has("socket closed") || has("connection reset"))) {
    return absl::StrCat(at, " speaks TLS; drop --insecure and pass its CA with --tls-ca or HETPOOL_TLS_CA");
  }
  if (has("connection refused")) {
    return absl::StrCat("nothing accepts connections at ", s.server,
                        ": is hetpoold running there? (--server or HETPOOL_SERVER; default 127.0.0.1:7070)");
  }
  if (has("dns resolution failed") || has("domain name not found")) {
    return absl::StrCat("cannot resolve the host of ", s.server, " (--server or HETPOOL_SERVER)");
  }
  if (has("failed to connect") || has("socket closed") || has("connection reset")) {
    return absl::StrCat("cannot reach ", at, ": is it running, and does it speak ",
                        s.insecure ? "plaintext (--insecure)" : "TLS", " like this client?");
  }
  return std::nullopt;
}

}  // namespace hetpool::cli
