// Transport security for every hetpool connection: TLS with the operator's CA on both sides, or
// plaintext only when a program is started with --insecure (it logs a warning).
//   hetpoold:  its certificate; asks every client for a certificate and verifies the ones given
//              (agents must give one naming their node; hetpoolctl users give a token instead)
//   agent:     the CA, and its node certificate (CN=node:NAME)
//   hetpoolctl: the CA (and a bearer token)
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "src/common/flags.h"

namespace hetpool {

struct TlsFiles {
  std::string ca;    // PEM: the operator CA
  std::string cert;  // PEM: this program's certificate (optional for hetpoolctl)
  std::string key;   // PEM: its private key
};

// Adds --tls-ca, --tls-cert, --tls-key and --insecure to a program's flags.
void AddTlsFlags(FlagSet& flags, TlsFiles* files, bool* insecure);

// Checks the combination: TLS files, or --insecure, not both, not neither.
absl::Status CheckTransportFlags(const TlsFiles& files, bool insecure, bool cert_required);

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const TlsFiles& files, bool insecure);
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(const TlsFiles& files, bool insecure);

}  // namespace hetpool
