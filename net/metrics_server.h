// MetricsServer: a Prometheus /metrics endpoint with one registry for the
// process's metrics, plus any collectables that compute their samples at
// scrape time, and /healthz (200 "ok") for HTTP health probes.
//
//   ASSIGN_OR_RETURN(auto metrics, MetricsServer::Start("127.0.0.1:0"));
//   auto& steps = prometheus::BuildCounter().Name("chimera_steps_total")
//                     .Help("...").Register(metrics->registry());
//   std::cout << "metrics on " << metrics->address();
//
// It is a small HTTP/1.1 server of its own (one thread, `Connection: close`)
// rather than prometheus-cpp's civetweb exposer: civetweb starts its threads
// with a fixed small stack, which cannot hold the static TLS of a process
// that loads LibTorch, so it fails in the workers. Scrapes are rare and their
// answers small, so one thread polls every connection: it holds up to 64 at
// once, reads and writes each without blocking, answers a request as soon as
// its head is complete, and closes any connection 5 s after accepting it,
// whatever it has sent by then. A newcomer beyond 64 closes the oldest
// connection: refusing newcomers instead would let 64 silent clients, opened
// again every 5 s, lock every scrape out, while evicting means a client must
// open 64 connections within a scrape's single round trip to cut it off.
//
// Why not cpp-httplib (measured with Debian 12's libcpp-httplib 0.11.4): it
// serves fine beside LibTorch 1.13 (its threads are std::threads with the
// default stack), but it cannot bound what one client makes it buffer, and
// being a compiled library it leaves us no hook to do so: it keeps every
// header line it reads, with no limit on their number, and buffers a line
// without end before checking its length. One client sending 300 MB of
// 1 KB header lines in 9 s grew a coordinator from 24 MB to 640 MB resident,
// still held after the client left; 300 MB with no newline added 305 MB for
// as long as it stayed connected. Read timeouts apply to each read, not to
// the request, so nothing stops that client early. This server reads at most
// 16 KiB of a request, answers and closes. (httplib also answered nothing to
// an HTTP/1.1 client that half-closed after its request.)
#ifndef CHIMERA_NET_METRICS_SERVER_H_
#define CHIMERA_NET_METRICS_SERVER_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/collectable.h"
#include "prometheus/registry.h"

namespace chimera::net {

class MetricsServer {
 public:
  // Who may reach the endpoint. The page has no authentication and names
  // jobs, workers and hosts, so an address beyond loopback must be asked for
  // (--metrics-public).
  enum class Reach { kLoopbackOnly, kAnyone };

  // Serves /metrics and /healthz on `listen` (HOST:PORT, port 0 = any free
  // one). INVALID_ARGUMENT for a malformed address, or for one beyond
  // loopback unless `reach` is kAnyone; UNAVAILABLE when it cannot bind.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& listen, Reach reach = Reach::kLoopbackOnly);
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
  // The whole HTTP answer to `request`.
  std::string Answer(absl::string_view request);
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
