#include "net/malformed_request.h"

#include <grpcpp/support/server_interceptor.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace chimera::net {
namespace {

class MalformedRequestStatus : public grpc::experimental::Interceptor {
 public:
  explicit MalformedRequestStatus(std::string method)
      : method_(std::move(method)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      if (status.error_code() == grpc::StatusCode::INTERNAL &&
          status.error_message().empty()) {
        methods->ModifySendStatus(grpc::Status(
            grpc::StatusCode::INVALID_ARGUMENT,
            absl::StrCat("the request is not a valid message of ", method_)));
      }
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
};

class MalformedRequestStatusFactory
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new MalformedRequestStatus(info->method());
  }
};

}  // namespace

void InstallMalformedRequestStatus(grpc::ServerBuilder& builder) {
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      factories;
  factories.push_back(std::make_unique<MalformedRequestStatusFactory>());
  builder.experimental().SetInterceptorCreators(std::move(factories));
}

}  // namespace chimera::net
