#include "net/plaintext_credentials.h"

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpcpp/security/auth_metadata_processor.h>

#include <string>

namespace chimera::net {
namespace {

grpc::string_ref View(const grpc_slice& slice) {
  return grpc::string_ref(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(slice)),
                          GRPC_SLICE_LENGTH(slice));
}

// gRPC core's processor interface, forwarding to a C++ processor. The state
// is a heap-held shared_ptr, so the processor lives as long as the core
// credentials (and the server's connections that hold them), not only as
// long as the C++ object that set it.
void Process(void* state, grpc_auth_context* /*context*/, const grpc_metadata* metadata,
             size_t count, grpc_process_auth_metadata_done_cb done, void* user_data) {
  auto& processor = *static_cast<std::shared_ptr<grpc::AuthMetadataProcessor>*>(state);
  grpc::AuthMetadataProcessor::InputMetadata input;
  for (size_t i = 0; i < count; ++i) input.emplace(View(metadata[i].key), View(metadata[i].value));
  grpc::AuthMetadataProcessor::OutputMetadata consumed, response;
  const grpc::Status status = processor->Process(input, nullptr, &consumed, &response);
  const std::string message = status.error_message();
  done(user_data, nullptr, 0, nullptr, 0, static_cast<grpc_status_code>(status.error_code()),
       message.c_str());
}

void Destroy(void* state) {
  delete static_cast<std::shared_ptr<grpc::AuthMetadataProcessor>*>(state);
}

class PlaintextCredentials final : public grpc::ServerCredentials {
 public:
  PlaintextCredentials() : credentials_(grpc_insecure_server_credentials_create()) {}
  ~PlaintextCredentials() override { grpc_server_credentials_release(credentials_); }
  PlaintextCredentials(const PlaintextCredentials&) = delete;
  PlaintextCredentials& operator=(const PlaintextCredentials&) = delete;

  void SetAuthMetadataProcessor(
      const std::shared_ptr<grpc::AuthMetadataProcessor>& processor) override {
    grpc_server_credentials_set_auth_metadata_processor(
        credentials_,
        {Process, Destroy, new std::shared_ptr<grpc::AuthMetadataProcessor>(processor)});
  }

 private:
  int AddPortToServer(const std::string& address, grpc_server* server) override {
    return grpc_server_add_http2_port(server, address.c_str(), credentials_);
  }

  grpc_server_credentials* const credentials_;
};

}  // namespace

std::shared_ptr<grpc::ServerCredentials> PlaintextServerCredentials() {
  return std::make_shared<PlaintextCredentials>();
}

}  // namespace chimera::net
