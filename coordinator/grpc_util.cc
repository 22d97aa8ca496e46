#include "coordinator/grpc_util.h"

#include <openssl/crypto.h>

namespace chimera::coordinator {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

grpc::Status CheckToken(const grpc::ServerContextBase& context, const std::string& expected) {
  if (expected.empty()) return grpc::Status::OK;
  const std::string wanted = "Bearer " + expected;
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  // Constant-time comparison: the time taken must not tell how much of a
  // guessed token was right.
  if (it != metadata.end() && it->second.size() == wanted.size() &&
      CRYPTO_memcmp(it->second.data(), wanted.data(), wanted.size()) == 0) {
    return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "missing or wrong token (authorization: Bearer ...)");
}

}  // namespace chimera::coordinator
