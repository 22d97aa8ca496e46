// absl::Status to grpc::Status and back: the codes are numerically the
// same, and the message goes along whole.
//
//   return net::ToGrpcStatus(jobs.Stop(id));                 // a handler
//   RETURN_IF_ERROR(net::FromGrpcStatus(stub->GetJob(...)));  // a client
#ifndef CHIMERA_NET_GRPC_STATUS_H_
#define CHIMERA_NET_GRPC_STATUS_H_

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"

namespace chimera::net {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace chimera::net

#endif  // CHIMERA_NET_GRPC_STATUS_H_
