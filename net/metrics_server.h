// MetricsServer: a Prometheus /metrics endpoint with one registry for the
// process's metrics, plus any collectables that compute their samples at
// scrape time.
//
//   ASSIGN_OR_RETURN(auto metrics, MetricsServer::Start("127.0.0.1:0"));
//   auto& steps = prometheus::BuildCounter().Name("chimera_steps_total")
//                     .Help("...").Register(metrics->registry());
//   std::cout << "metrics on " << metrics->address();
//
// It is a small HTTP/1.1 server of its own (one thread, one connection at a
// time, `Connection: close`) rather than prometheus-cpp's civetweb exposer:
// civetweb starts its threads with a fixed small stack, which cannot hold the
// static TLS of a process that loads LibTorch, so it fails in the workers.
// Scrapes are rare and their answers small; serving them one by one is
// enough.
#ifndef CHIMERA_NET_METRICS_SERVER_H_
#define CHIMERA_NET_METRICS_SERVER_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/collectable.h"
#include "prometheus/registry.h"

namespace chimera::net {

class MetricsServer {
 public:
  // Serves /metrics on `listen` (HOST:PORT, port 0 = any free one).
  // INVALID_ARGUMENT for a malformed address, UNAVAILABLE when it cannot
  // bind.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& listen);
  // Stops serving; a scrape in progress is cut off.
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  prometheus::Registry& registry() { return *registry_; }
  // Adds samples computed when scraped; thread-safe.
  void Add(std::shared_ptr<prometheus::Collectable> collectable);
  // HOST:PORT actually bound.
  const std::string& address() const { return address_; }

 private:
  MetricsServer(int listen_fd, int wake_fd, std::string address);

  void Serve();
  void Answer(int connection);
  // The exposition text of every collectable.
  std::string Scrape();

  const int listen_fd_;
  // Written once by the destructor to wake Serve().
  const int wake_fd_;
  const std::string address_;
  std::shared_ptr<prometheus::Registry> registry_;
  absl::Mutex mutex_;
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_
      ABSL_GUARDED_BY(mutex_);
  std::thread thread_;
};

}  // namespace chimera::net

#endif  // CHIMERA_NET_METRICS_SERVER_H_
