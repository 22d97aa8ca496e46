#include "coordinator/token_gate.h"

#include <openssl/crypto.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "chimera/v1/service.grpc.pb.h"

namespace chimera::coordinator {
namespace {

std::string Authorization(const std::string& token) {
  return token.empty() ? "" : "Bearer " + token;
}

absl::string_view View(grpc::string_ref text) { return {text.data(), text.size()}; }

// "/package.Service/" of `Service`, the start of every path of its methods.
template <typename Service>
std::string PathPrefix() {
  return absl::StrCat("/", Service::service_full_name(), "/");
}

}  // namespace

TokenGate::TokenGate(std::string client_token, std::string worker_token)
    : client_authorization_(Authorization(client_token)),
      worker_authorization_(Authorization(worker_token)) {}

grpc::Status TokenGate::Process(const InputMetadata& metadata, grpc::AuthContext*,
                                OutputMetadata*, OutputMetadata*) {
  static const std::string kJobService = PathPrefix<chimera::v1::JobService>();
  static const std::string kWorkerService = PathPrefix<chimera::v1::WorkerService>();
  const grpc::Status refused(grpc::StatusCode::UNAUTHENTICATED,
                             "missing or wrong token (authorization: Bearer ...)");
  // Every call has one: without it, nothing says which token it needs.
  const auto path = metadata.find(":path");
  if (path == metadata.end()) return refused;
  const absl::string_view method = View(path->second);
  const std::string* wanted = absl::StartsWith(method, kJobService)      ? &client_authorization_
                              : absl::StartsWith(method, kWorkerService) ? &worker_authorization_
                                                                         : nullptr;
  if (wanted == nullptr || wanted->empty()) return grpc::Status::OK;
  const auto given = metadata.find("authorization");
  // Constant-time comparison: the time taken must not tell how much of a
  // guessed token was right.
  if (given != metadata.end() && given->second.size() == wanted->size() &&
      CRYPTO_memcmp(given->second.data(), wanted->data(), wanted->size()) == 0) {
    return grpc::Status::OK;
  }
  return refused;
}

}  // namespace chimera::coordinator
