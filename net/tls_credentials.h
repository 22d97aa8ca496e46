// TLS for the coordinator's gRPC server and for its clients (the CLI and the
// worker daemons), from PEM files named by flags. Every file is read and
// parsed when the credentials are built, so a missing or unreadable one, one
// that holds no PEM certificate or key, or a key that is not its
// certificate's, is an error naming its flag, the file and what is wrong,
// not a failed handshake or "cannot listen" later.
//
//   ASSIGN_OR_RETURN(auto credentials, ChannelCredentials({.ca = "ca.pem"}));
//   auto channel = grpc::CreateChannel(address, credentials);
#ifndef CHIMERA_NET_TLS_CREDENTIALS_H_
#define CHIMERA_NET_TLS_CREDENTIALS_H_

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace chimera::net {

// The server's files (--tls-cert, --tls-key, --tls-client-ca); all empty:
// plaintext (that still takes an AuthMetadataProcessor, see
// plaintext_credentials.h). A client CA makes the server require client
// certificates that chain to it (mTLS).
struct ServerTlsFiles {
  std::string certificate;
  std::string private_key;
  std::string client_ca;
};

// A client's files (--tls-ca, --tls-cert, --tls-key); all empty: plaintext.
// `ca` verifies the server (empty: the system's roots); the certificate and
// key are this client's identity for a server that requires one.
struct ClientTlsFiles {
  std::string ca;
  std::string certificate;
  std::string private_key;
};

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const ServerTlsFiles& files);
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const ClientTlsFiles& files);

}  // namespace chimera::net

#endif  // CHIMERA_NET_TLS_CREDENTIALS_H_
