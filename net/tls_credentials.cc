#include "net/tls_credentials.h"

#include "absl/strings/str_cat.h"
#include "common/file_reader.h"
#include "common/status_macros.h"

namespace chimera::net {
namespace {

constexpr uint64_t kMaxPemBytes = 1 << 20;

// The PEM file given to `flag`.
absl::StatusOr<std::string> ReadPem(const std::string& path, const char* flag) {
  absl::StatusOr<std::string> pem = ReadTextFile(path, kMaxPemBytes);
  if (!pem.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", pem.status().message()));
  }
  return pem;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const ServerTlsFiles& files) {
  if (files.certificate.empty() && files.private_key.empty() &&
      files.client_ca.empty()) {
    return grpc::InsecureServerCredentials();
  }
  if (files.certificate.empty() || files.private_key.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs both a certificate and a private key (--tls-cert, "
        "--tls-key)");
  }
  grpc::SslServerCredentialsOptions ssl;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  ASSIGN_OR_RETURN(pair.cert_chain, ReadPem(files.certificate, "--tls-cert"));
  ASSIGN_OR_RETURN(pair.private_key, ReadPem(files.private_key, "--tls-key"));
  ssl.pem_key_cert_pairs.push_back(pair);
  if (!files.client_ca.empty()) {
    ASSIGN_OR_RETURN(ssl.pem_root_certs,
                     ReadPem(files.client_ca, "--tls-client-ca"));
    ssl.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const ClientTlsFiles& files) {
  if (files.ca.empty() && files.certificate.empty() &&
      files.private_key.empty()) {
    return grpc::InsecureChannelCredentials();
  }
  if (files.certificate.empty() != files.private_key.empty()) {
    return absl::InvalidArgumentError(
        "a client certificate needs both --tls-cert and --tls-key");
  }
  grpc::SslCredentialsOptions ssl;
  if (!files.ca.empty()) {
    ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPem(files.ca, "--tls-ca"));
  }
  if (!files.certificate.empty()) {
    ASSIGN_OR_RETURN(ssl.pem_cert_chain,
                     ReadPem(files.certificate, "--tls-cert"));
    ASSIGN_OR_RETURN(ssl.pem_private_key,
                     ReadPem(files.private_key, "--tls-key"));
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace chimera::net
