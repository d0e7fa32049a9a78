#include "src/common/tls.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/security/credentials.h"

namespace hetpool {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& flag, const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", text.status().message()));
  if (text->find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", path, ": not a PEM file"));
  }
  return text;
}

}  // namespace

void AddTlsFlags(FlagSet& flags, TlsFiles* files, bool* insecure) {
  flags.String("tls-ca", &files->ca, "PEM file of the operator CA (deploy/pki.sh init-ca)");
  flags.String("tls-cert", &files->cert, "PEM certificate of this program (deploy/pki.sh server|node)");
  flags.String("tls-key", &files->key, "PEM private key of --tls-cert");
  flags.Bool("insecure", insecure, "plaintext and no authentication (tests, demos): anyone on the network may act");
}

absl::Status CheckTransportFlags(const TlsFiles& files, bool insecure, bool cert_required) {
  const bool any = !files.ca.empty() || !files.cert.empty() || !files.key.empty();
  if (insecure && any) return absl::InvalidArgumentError("--insecure contradicts --tls-ca/--tls-cert/--tls-key");
  if (insecure) return absl::OkStatus();
  if (files.ca.empty()) {
    return absl::InvalidArgumentError("--tls-ca is required (or --insecure for plaintext without authentication)");
  }
  if (files.cert.empty() != files.key.empty())
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  if (cert_required && files.cert.empty()) return absl::InvalidArgumentError("--tls-cert and --tls-key are required");
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const TlsFiles& files, bool insecure) {
  if (insecure) return grpc::InsecureServerCredentials();
  auto ca = ReadPem("tls-ca", files.ca);
  if (!ca.ok()) return ca.status();
  auto cert = ReadPem("tls-cert", files.cert);
  if (!cert.ok()) return cert.status();
  auto key = ReadPem("tls-key", files.key);
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions options(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = *ca;
  options.pem_key_cert_pairs.push_back({*key, *cert});
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(const TlsFiles& files, bool insecure) {
  if (insecure) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  auto ca = ReadPem("tls-ca", files.ca);
  if (!ca.ok()) return ca.status();
  options.pem_root_certs = *ca;
  if (!files.cert.empty()) {
    auto cert = ReadPem("tls-cert", files.cert);
    if (!cert.ok()) return cert.status();
    auto key = ReadPem("tls-key", files.key);
    if (!key.ok()) return key.status();
    options.pem_cert_chain = *cert;
    options.pem_private_key = *key;
  }
  return grpc::SslCredentials(options);
}

}  // namespace hetpool
