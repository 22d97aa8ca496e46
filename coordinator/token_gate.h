// TokenGate: which calls the coordinator reads. A call to JobService must
// carry the client token, one to WorkerService the worker token
// ("authorization: Bearer <token>"); the health and reflection services need
// none. gRPC runs the gate on a call's metadata before it reads the request
// (net/plaintext_credentials.h, and TLS credentials alike), so a caller
// without the token costs the coordinator its headers, never the body it
// sends: a wrong token is UNAUTHENTICATED, without saying which part was
// wrong.
//
//   credentials->SetAuthMetadataProcessor(
//       std::make_shared<TokenGate>(client_token, worker_token));
#ifndef CHIMERA_COORDINATOR_TOKEN_GATE_H_
#define CHIMERA_COORDINATOR_TOKEN_GATE_H_

#include <grpcpp/security/auth_metadata_processor.h>

#include <string>

namespace chimera::coordinator {

class TokenGate final : public grpc::AuthMetadataProcessor {
 public:
  // An empty token lets every call to its service in (loopback deployments).
  TokenGate(std::string client_token, std::string worker_token);

  // It only compares strings: gRPC runs it inline, on the thread that read
  // the call's headers.
  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed, OutputMetadata* response) override;

 private:
  // "Bearer <token>", or empty when there is no token.
  const std::string client_authorization_;
  const std::string worker_authorization_;
};

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_TOKEN_GATE_H_
