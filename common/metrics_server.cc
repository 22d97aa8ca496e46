#include "common/metrics_server.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace chimera {

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address '", listen, "' must be HOST:PORT"));
  }
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  try {
    server->exposer_ = std::make_unique<prometheus::Exposer>(listen);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", listen, ": ", e.what()));
  }
  const std::vector<int> ports = server->exposer_->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", listen));
  }
  server->address_ = absl::StrCat(listen.substr(0, colon), ":", ports.front());
  server->registry_ = std::make_shared<prometheus::Registry>();
  server->exposer_->RegisterCollectable(server->registry_);
  return server;
}

void MetricsServer::Add(std::shared_ptr<prometheus::Collectable> collectable) {
  exposer_->RegisterCollectable(collectable);
  collectables_.push_back(std::move(collectable));
}

}  // namespace chimera
