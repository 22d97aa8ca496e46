// What every gRPC handler of the coordinator shares: absl::Status to
// grpc::Status (net/grpc_status.h) and the bound on a request's size. (The token check runs before any handler: token_gate.h.)
#ifndef CHIMERA_COORDINATOR_GRPC_UTIL_H_
#define CHIMERA_COORDINATOR_GRPC_UTIL_H_

#include <google/protobuf/message_lite.h>
#include <grpcpp/grpcpp.h>

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "net/grpc_status.h"

// Returns a non-OK grpc::Status from the enclosing handler.
#define CHIMERA_RETURN_IF_GRPC_ERROR(expr)                \
  do {                                                    \
    const ::grpc::Status chimera_grpc_status_ = (expr);   \
    if (!chimera_grpc_status_.ok()) return chimera_grpc_status_; \
  } while (false)

namespace chimera::coordinator {

// The largest request of each kind, in bytes. gRPC reads a request whole, up
// to the server's one limit (kMaxRequestBytes, the largest of them), before
// a handler sees it; the handler then refuses one beyond its method's bound
// before acting on it.
//
// Ids, names, a page token, a worker's registration (its devices and a held
// task's message of at most 4 KiB).
inline constexpr size_t kMaxSmallRequestBytes = 64 << 10;
// A job (jobspec caps one at 64 KiB), with room for the job validator to
// name what makes a bigger one too big.
inline constexpr size_t kMaxJobRequestBytes = 256 << 10;
// A step's metrics with its timeline, while someone traces the job: 16 bytes
// for each instruction of the rank's program, whose StartTask a worker must
// receive within gRPC's default 4 MiB.
inline constexpr size_t kMaxMetricsRequestBytes = 8 << 20;
inline constexpr size_t kMaxRequestBytes = kMaxMetricsRequestBytes;

using net::ToGrpcStatus;

// OK when `request` is at most `max_bytes` long; RESOURCE_EXHAUSTED naming
// `method` and its bound otherwise.
grpc::Status CheckRequestSize(const google::protobuf::MessageLite& request, size_t max_bytes,
                              absl::string_view method);

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_GRPC_UTIL_H_
