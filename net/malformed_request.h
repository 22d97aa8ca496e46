// gRPC answers a request whose bytes do not parse as the method's message
// with INTERNAL and an empty message, as if the server had failed. The
// client sent it, so our servers answer INVALID_ARGUMENT naming the method.
//
//   grpc::ServerBuilder builder;
//   InstallMalformedRequestStatus(builder);
#ifndef CHIMERA_NET_MALFORMED_REQUEST_H_
#define CHIMERA_NET_MALFORMED_REQUEST_H_

#include <grpcpp/server_builder.h>

namespace chimera::net {

// Adds the interceptor that rewrites that status on every call `builder`'s
// server answers. Handlers never return INTERNAL without a message, so
// nothing else is touched.
void InstallMalformedRequestStatus(grpc::ServerBuilder& builder);

}  // namespace chimera::net

#endif  // CHIMERA_NET_MALFORMED_REQUEST_H_
