// Plaintext gRPC server credentials that run an AuthMetadataProcessor, as
// TLS credentials do: gRPC's own InsecureServerCredentials() abort on
// SetAuthMetadataProcessor. A processor sees each call's metadata (the
// method's ":path" among it) before the server reads the request, so a
// caller it refuses never has its body read.
//
//   std::shared_ptr<grpc::ServerCredentials> credentials = PlaintextServerCredentials();
//   credentials->SetAuthMetadataProcessor(std::make_shared<MyGate>());
//   builder.AddListeningPort("0.0.0.0:50051", credentials);
#ifndef CHIMERA_NET_PLAINTEXT_CREDENTIALS_H_
#define CHIMERA_NET_PLAINTEXT_CREDENTIALS_H_

#include <grpcpp/security/server_credentials.h>

#include <memory>

namespace chimera::net {

// The processor runs on gRPC's thread, inline (it must not block), with no
// AuthContext (a plaintext peer has no identity: it gets nullptr); metadata
// it consumes stays on the call.
std::shared_ptr<grpc::ServerCredentials> PlaintextServerCredentials();

}  // namespace chimera::net

#endif  // CHIMERA_NET_PLAINTEXT_CREDENTIALS_H_
