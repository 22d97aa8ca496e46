// The worker daemon's Prometheus metrics, computed when scraped from what the
// daemon saw last (it runs one task at a time):
//   chimera_worker_info{worker,node,version}            gauge (1)
//   chimera_worker_registered                           gauge (0/1)
//   chimera_worker_task{job,rank}                       gauge (1 while a task
//   runs) chimera_worker_tasks_total{outcome}                 counter:
//   succeeded/failed/stopped chimera_worker_steps_total counter
//   chimera_worker_heartbeat_failures_total             counter
// and, for the running task's last step (labels job, rank; gone when it ends):
//   chimera_worker_step, chimera_worker_loss, chimera_worker_step_seconds,
//   chimera_worker_bubble_ratio, chimera_worker_samples_per_second,
//   chimera_worker_tokens_per_second, chimera_worker_recv_wait_seconds,
//   chimera_worker_exposed_allreduce_seconds,
//   chimera_worker_memory_bytes{kind=weights|gradients|optimizer|activations|peak}
#ifndef CHIMERA_WORKER_DAEMON_DAEMON_METRICS_H_
#define CHIMERA_WORKER_DAEMON_DAEMON_METRICS_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "chimera/v1/service.pb.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace chimera::worker {

class DaemonMetrics : public prometheus::Collectable {
 public:
  DaemonMetrics(std::string worker_id, std::string node);

  // All thread-safe.
  void SetRegistered(bool registered);
  void HeartbeatFailed();
  void TaskStarted(const std::string& job_id, int rank);
  void StepDone(const chimera::v1::WorkerStepMetrics& step);
  // `outcome`: "succeeded", "failed" or "stopped".
  void TaskEnded(const std::string& outcome);

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  struct RunningTask {
    std::string job_id;
    int rank = 0;
    std::optional<chimera::v1::WorkerStepMetrics> last_step;
  };

  const std::string worker_id_;
  const std::string node_;
  mutable absl::Mutex mutex_;
  bool registered_ ABSL_GUARDED_BY(mutex_) = false;
  double heartbeat_failures_ ABSL_GUARDED_BY(mutex_) = 0;
  double steps_ ABSL_GUARDED_BY(mutex_) = 0;
  std::map<std::string, double> tasks_by_outcome_ ABSL_GUARDED_BY(mutex_);
  std::optional<RunningTask> task_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_DAEMON_DAEMON_METRICS_H_
