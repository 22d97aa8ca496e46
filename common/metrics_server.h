// MetricsServer: a Prometheus /metrics endpoint (prometheus-cpp's exposer)
// with one registry for the process's metrics, plus any collectables that
// compute their samples at scrape time.
//
//   ASSIGN_OR_RETURN(auto metrics, MetricsServer::Start("127.0.0.1:0"));
//   auto& steps = prometheus::BuildCounter().Name("chimera_steps_total")
//                     .Help("...").Register(metrics->registry());
//   std::cout << "metrics on " << metrics->address();
#ifndef CHIMERA_COMMON_METRICS_SERVER_H_
#define CHIMERA_COMMON_METRICS_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"

namespace chimera {

class MetricsServer {
 public:
  // Serves /metrics on `listen` (HOST:PORT, port 0 = any free one).
  // UNAVAILABLE when it cannot bind.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& listen);

  prometheus::Registry& registry() { return *registry_; }
  // Adds samples computed when scraped; `collectable` must outlive the
  // server or be held by it.
  void Add(std::shared_ptr<prometheus::Collectable> collectable);
  // HOST:PORT actually bound.
  const std::string& address() const { return address_; }

 private:
  MetricsServer() = default;

  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;
  std::string address_;
};

}  // namespace chimera

#endif  // CHIMERA_COMMON_METRICS_SERVER_H_
