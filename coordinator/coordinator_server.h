// CoordinatorServer: the whole coordinator in one object — job store,
// worker registry, job manager, the gRPC JobService and WorkerService with
// the standard health service and reflection, behind the token gate
// (token_gate.h), and the background loop that checks liveness and starts
// queued jobs. chimera-coordinator runs one;
// `chimera run` embeds one on loopback.
//
//   ASSIGN_OR_RETURN(auto server, CoordinatorServer::Start(options));
//   std::cout << "listening on " << server->address();
//   ...
//   server->Shutdown();
#ifndef CHIMERA_COORDINATOR_COORDINATOR_SERVER_H_
#define CHIMERA_COORDINATOR_COORDINATOR_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "coordinator/job_manager.h"
#include "coordinator/job_service.h"
#include "coordinator/job_store.h"
#include "coordinator/worker_registry.h"
#include "coordinator/worker_service.h"
#include "net/metrics_flags.h"
#include "net/metrics_server.h"
#include "net/server_address.h"
#include "net/tls_credentials.h"

namespace chimera::coordinator {

struct CoordinatorOptions {
  // HOST:PORT; port 0 picks a free one. Non-loopback hosts need both tokens.
  std::string listen = "127.0.0.1:50051";
  // SQLite file; ":memory:" keeps nothing across restarts.
  std::string database = "chimera-coordinator.db";
  // The most the store may grow to, in bytes (0: as the disk allows).
  int64_t database_max_bytes = 0;
  HeartbeatPolicy heartbeat;
  JobManagerOptions jobs;
  // Empty: none asked for (loopback only). A token given has at least
  // kMinTokenBytes printable ASCII characters, not all blank, and the two
  // differ (--client-token, --worker-token).
  std::string client_token;
  std::string worker_token;
  net::ServerTlsFiles tls;
  // The Prometheus /metrics endpoint (none without an address).
  net::MetricsFlags metrics;
};

// A background loop that wakes this many periods late was stalled with the
// whole process (JobManager::ExcuseStall).
inline constexpr int kStalledLoopFactor = 2;

// The fewest characters a token may have: a letter or a word is guessed in
// no time (`openssl rand -hex 16` makes a token of 32).
inline constexpr size_t kMinTokenBytes = 16;

class CoordinatorServer {
 public:
  // INVALID_ARGUMENT for a bad address or a non-loopback one without
  // tokens, a weak token or the same for both roles, a non-loopback metrics
  // address without metrics.public_reach, or TLS files that do not parse;
  // UNAVAILABLE when the address cannot be bound; the store's errors as they
  // are.
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(
      const CoordinatorOptions& options);
  ~CoordinatorServer();
  CoordinatorServer(const CoordinatorServer&) = delete;
  CoordinatorServer& operator=(const CoordinatorServer&) = delete;

  // host:port actually bound (the chosen port when 0 was asked for).
  const std::string& address() const { return address_; }
  // host:port of /metrics; empty when not serving metrics.
  std::string metrics_address() const {
    return metrics_ ? metrics_->address() : "";
  }
  // Stops accepting calls, ends streams, stops the background loop.
  void Shutdown();

 private:
  CoordinatorServer() = default;
  void RunLoop(absl::Duration period);
  // The steps of Start: the job store, registry, manager and services; then
  // the gRPC server on `address` (its port chosen when 0).
  absl::Status OpenJobs(const CoordinatorOptions& options);
  absl::Status Listen(net::ServerAddress address,
                      const std::shared_ptr<grpc::ServerCredentials>& credentials);

  std::unique_ptr<JobStore> store_;
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<JobServiceImpl> job_service_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<net::MetricsServer> metrics_;
  std::string address_;
  absl::Notification stopping_;
  std::thread loop_;
  bool shut_down_ = false;
};

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_COORDINATOR_SERVER_H_
