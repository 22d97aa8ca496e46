#include "coordinator/grpc_util.h"

#include "absl/strings/str_cat.h"

namespace chimera::coordinator {

grpc::Status CheckRequestSize(const google::protobuf::MessageLite& request, size_t max_bytes,
                              absl::string_view method) {
  const size_t size = request.ByteSizeLong();
  if (size <= max_bytes) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                      absl::StrCat("the request is ", size, " bytes; ", method, " takes at most ",
                                   max_bytes));
}

}  // namespace chimera::coordinator
