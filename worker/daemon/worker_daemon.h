// WorkerDaemon: `chimera-worker daemon --coordinator HOST:PORT`. Registers this
// machine's devices and memory with a random incarnation, heartbeats, follows
// its assignment stream, runs each task in a task process (see
// task_process.h) and relays what it reports: rendezvous, per-step metrics,
// the outcome. A stop kills the task process (SIGTERM, then SIGKILL after a
// grace period) and the worker is idle again. While the coordinator is away
// the task goes on; when it restarts or declares the worker dead, the daemon
// registers again with the task it holds, running or ended, and stops it
// unless the coordinator keeps it. Its metrics (daemon_metrics.h) are served
// by the caller.
//
//   WorkerDaemon daemon(options, grpc::InsecureChannelCredentials());
//   std::thread signals([&] { WaitForSignal(); daemon.Shutdown(); });
//   return daemon.Run().ok() ? 0 : 3;
#ifndef CHIMERA_WORKER_DAEMON_WORKER_DAEMON_H_
#define CHIMERA_WORKER_DAEMON_WORKER_DAEMON_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "chimera/v1/service.grpc.pb.h"
#include "worker/daemon/daemon_metrics.h"
#include "worker/daemon/local_devices.h"
#include "worker/runtime/task_spec.h"

namespace chimera::worker {

struct DaemonOptions {
  // HOST:PORT of the coordinator.
  std::string coordinator;
  // Join token (empty: none).
  std::string token;
  // Stable name of this worker; its node (host) name.
  std::string worker_id;
  std::string node;
  // This host as the other workers reach it (rendezvous and Gloo).
  std::string host = "127.0.0.1";
  // The chimera-worker binary to run task processes with.
  std::string task_binary;
  // Where task files and task logs go.
  std::string work_dir;
  // The only places a task reads data from and writes checkpoints to.
  WorkerRoots roots;
  // HOST:PORT of this daemon's /metrics, told to the coordinator (empty:
  // none).
  std::string metrics_address;
  // The CUDA device this worker's gpu tasks compute on, the one GPU it
  // registers: a machine with several GPUs runs one daemon per GPU.
  int gpu = 0;
  // Peak FLOP/s of its device (--peak-flops); 0: a GPU's known one, or none.
  double peak_flops = 0;
  // The OpenBLAS core its task processes run (empty: another BLAS).
  std::string blas_core;
};

class WorkerDaemon {
 public:
  // `credentials`: plaintext or TLS (see net/tls_credentials.h).
  WorkerDaemon(DaemonOptions options,
               std::shared_ptr<grpc::ChannelCredentials> credentials);
  ~WorkerDaemon();
  WorkerDaemon(const WorkerDaemon&) = delete;
  WorkerDaemon& operator=(const WorkerDaemon&) = delete;

  // Serves until Shutdown(); reconnects whenever the coordinator goes away.
  // ALREADY_EXISTS once another daemon has registered under this worker id
  // (the message says from which host, and when): taking the id back would
  // evict that one, and it this one, for ever.
  absl::Status Run();
  // Thread-safe: ends Run() soon, stopping a running task first.
  void Shutdown();
  // What the daemon does, for a MetricsServer to serve.
  std::shared_ptr<DaemonMetrics> metrics() const { return metrics_; }

 private:
  class Task;

  std::unique_ptr<grpc::ClientContext> Context() const;
  // Registers with the task held, if any; true when the coordinator keeps
  // it running.
  absl::StatusOr<bool> Register();
  void SetRegistered(bool registered);
  // Follows the assignment stream until it ends.
  absl::Status Watch();
  void HeartbeatLoop();
  void Handle(const chimera::v1::Assignment& assignment);
  void DropTask();
  // How the task of `start` shows in this worker's metrics.
  DaemonMetrics::TaskInfo MetricsTaskInfo(
      const chimera::v1::StartTask& start) const;

  const DaemonOptions options_;
  const LocalResources resources_;
  std::unique_ptr<chimera::v1::WorkerService::Stub> stub_;
  const uint64_t incarnation_;
  const std::shared_ptr<DaemonMetrics> metrics_;
  absl::Notification shutdown_;
  std::atomic<bool> registered_{false};
  std::atomic<int64_t> heartbeat_period_ms_{1000};
  absl::Mutex mutex_;
  std::shared_ptr<grpc::ClientContext> stream_ ABSL_GUARDED_BY(mutex_);
  std::unique_ptr<Task> task_ ABSL_GUARDED_BY(mutex_);
  std::thread heartbeats_;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_DAEMON_WORKER_DAEMON_H_
