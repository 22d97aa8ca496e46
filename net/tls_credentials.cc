#include "net/tls_credentials.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_reader.h"
#include "common/status_macros.h"
#include "net/plaintext_credentials.h"

namespace chimera::net {
namespace {

constexpr uint64_t kMaxPemBytes = 1 << 20;

using Bio = std::unique_ptr<BIO, decltype(&BIO_free)>;
using Certificate = std::unique_ptr<X509, decltype(&X509_free)>;
using PrivateKey = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

// One PEM file given to a flag, as read.
struct PemFile {
  const char* flag;
  std::string path;
  std::string text;

  // "--tls-cert: 'server.pem'", to open a message about the file.
  std::string Name() const { return absl::StrCat(flag, ": '", path, "'"); }
};

absl::StatusOr<PemFile> ReadPem(const std::string& path, const char* flag) {
  absl::StatusOr<std::string> text = ReadTextFile(path, kMaxPemBytes);
  if (!text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", text.status().message()));
  }
  return PemFile{flag, path, *std::move(text)};
}

Bio OpenPem(const PemFile& file) {
  ERR_clear_error();
  return Bio(BIO_new_mem_buf(file.text.data(), static_cast<int>(file.text.size())),
             BIO_free);
}

// Whether OpenSSL's last error is the PEM reader's "no (further) block of the
// kind asked for": the end of a file read block by block.
bool NoFurtherBlock() {
  const unsigned long error = ERR_peek_last_error();
  return ERR_GET_LIB(error) == ERR_LIB_PEM &&
         ERR_GET_REASON(error) == PEM_R_NO_START_LINE;
}

// OpenSSL's reason for its last error, for a message. Clears its errors.
std::string OpenSslReason() {
  const char* reason = ERR_reason_error_string(ERR_peek_last_error());
  ERR_clear_error();
  return reason == nullptr ? "no reason given" : reason;
}

// The first certificate of `file` (a chain or a set of CAs may follow);
// INVALID_ARGUMENT when it holds none, or one that does not parse. gRPC only
// fails later, at the handshake or as "cannot listen", naming neither.
absl::StatusOr<Certificate> ParseCertificates(const PemFile& file) {
  const Bio bio = OpenPem(file);
  Certificate first(nullptr, X509_free);
  while (X509* certificate = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    if (first == nullptr) {
      first.reset(certificate);
    } else {
      X509_free(certificate);
    }
  }
  if (!NoFurtherBlock()) {
    return absl::InvalidArgumentError(absl::StrCat(
        file.Name(), " holds a certificate that does not parse (", OpenSslReason(), ")"));
  }
  ERR_clear_error();
  if (first == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        file.Name(), " holds no PEM certificate (a block from -----BEGIN CERTIFICATE----- "
                     "to -----END CERTIFICATE-----)"));
  }
  return first;
}

// The private key of `file`; INVALID_ARGUMENT when it holds none, an
// encrypted one (gRPC takes no passphrase) or one that does not parse.
absl::StatusOr<PrivateKey> ParsePrivateKey(const PemFile& file) {
  const Bio bio = OpenPem(file);
  // Asked for a passphrase: there is none to give.
  pem_password_cb* no_passphrase = [](char*, int, int, void*) { return -1; };
  PrivateKey key(PEM_read_bio_PrivateKey(bio.get(), nullptr, no_passphrase, nullptr),
                 EVP_PKEY_free);
  const std::string reason = OpenSslReason();
  if (key != nullptr) return key;
  // OpenSSL 3 gives no reason that tells a file without a key from a key it
  // cannot read: the PEM labels do.
  if (!absl::StrContains(file.text, "PRIVATE KEY-----")) {
    return absl::InvalidArgumentError(absl::StrCat(
        file.Name(), " holds no PEM private key (a block from -----BEGIN PRIVATE KEY----- "
                     "to -----END PRIVATE KEY-----, or an RSA or EC one)"));
  }
  if (absl::StrContains(file.text, "ENCRYPTED")) {
    return absl::InvalidArgumentError(absl::StrCat(
        file.Name(), " holds an encrypted private key; gRPC takes no passphrase"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(file.Name(), " holds a private key that does not parse (", reason, ")"));
}

// A certificate chain and its key, each a PEM file that parses, the key
// the certificate's.
struct KeyPair {
  std::string certificate_chain;
  std::string private_key;
};

absl::StatusOr<KeyPair> ReadKeyPair(const std::string& certificate_path,
                                    const std::string& key_path) {
  ASSIGN_OR_RETURN(const PemFile chain, ReadPem(certificate_path, "--tls-cert"));
  ASSIGN_OR_RETURN(const PemFile key, ReadPem(key_path, "--tls-key"));
  ASSIGN_OR_RETURN(const Certificate certificate, ParseCertificates(chain));
  ASSIGN_OR_RETURN(const PrivateKey private_key, ParsePrivateKey(key));
  const bool matches = X509_check_private_key(certificate.get(), private_key.get()) == 1;
  ERR_clear_error();
  if (!matches) {
    return absl::InvalidArgumentError(absl::StrCat(
        key.Name(), " is not the private key of the certificate in ", chain.Name()));
  }
  return KeyPair{chain.text, key.text};
}

// The CA certificates of the PEM file given to `flag`.
absl::StatusOr<std::string> ReadCertificates(const std::string& path, const char* flag) {
  ASSIGN_OR_RETURN(const PemFile file, ReadPem(path, flag));
  RETURN_IF_ERROR(ParseCertificates(file).status());
  return file.text;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const ServerTlsFiles& files) {
  if (files.certificate.empty() && files.private_key.empty() &&
      files.client_ca.empty()) {
    return PlaintextServerCredentials();
  }
  if (files.certificate.empty() || files.private_key.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs both a certificate and a private key (--tls-cert, "
        "--tls-key)");
  }
  grpc::SslServerCredentialsOptions ssl;
  ASSIGN_OR_RETURN(const KeyPair pair, ReadKeyPair(files.certificate, files.private_key));
  ssl.pem_key_cert_pairs.push_back({pair.private_key, pair.certificate_chain});
  if (!files.client_ca.empty()) {
    ASSIGN_OR_RETURN(ssl.pem_root_certs,
                     ReadCertificates(files.client_ca, "--tls-client-ca"));
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
    ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadCertificates(files.ca, "--tls-ca"));
  }
  if (!files.certificate.empty()) {
    ASSIGN_OR_RETURN(KeyPair pair, ReadKeyPair(files.certificate, files.private_key));
    ssl.pem_cert_chain = std::move(pair.certificate_chain);
    ssl.pem_private_key = std::move(pair.private_key);
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace chimera::net
