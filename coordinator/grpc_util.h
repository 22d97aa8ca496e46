// What every gRPC handler of the coordinator shares: absl::Status to
// grpc::Status (the codes are numerically the same) and the bearer-token
// check.
#ifndef CHIMERA_COORDINATOR_GRPC_UTIL_H_
#define CHIMERA_COORDINATOR_GRPC_UTIL_H_

#include <grpcpp/grpcpp.h>

#include <string>

#include "absl/status/status.h"

// Returns a non-OK grpc::Status from the enclosing handler.
#define CHIMERA_RETURN_IF_GRPC_ERROR(expr)                \
  do {                                                    \
    const ::grpc::Status chimera_grpc_status_ = (expr);   \
    if (!chimera_grpc_status_.ok()) return chimera_grpc_status_; \
  } while (false)

namespace chimera::coordinator {

grpc::Status ToGrpcStatus(const absl::Status& status);

// OK when `expected` is empty (no token configured) or the request carries
// "authorization: Bearer <expected>"; UNAUTHENTICATED otherwise, without
// saying which part was wrong.
grpc::Status CheckToken(const grpc::ServerContextBase& context, const std::string& expected);

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_GRPC_UTIL_H_
