// The worker daemon's Prometheus metrics, computed when scraped from what the
// daemon saw last (it runs one task at a time):
//   chimera_worker_info{worker,node,version,blas_core} gauge (1)
//   chimera_worker_registered                      gauge (0/1)
//   chimera_worker_tasks_total{outcome}            counter: succeeded, failed,
//                                                  stopped
//   chimera_worker_steps_total                     counter
//   chimera_worker_heartbeat_failures_total        counter
// and, while a task runs, labelled train_job and rank (and gpu, the CUDA
// device index, on a GPU, so they join NVIDIA's DCGM exporter series):
//   chimera_worker_task (1), chimera_worker_memory_limit_bytes;
// from its first step on: the last step's chimera_worker_step, _loss,
//   _step_seconds, _busy_ratio, _bubble_ratio, _samples_per_second,
//   _tokens_per_second, _recv_wait_seconds, _exposed_allreduce_seconds,
//   chimera_worker_memory_bytes{kind}, and over all its steps
//   chimera_worker_op_seconds_total{op} and the histogram
//   chimera_worker_step_duration_seconds.
// docs/operations.md describes each.
#ifndef CHIMERA_WORKER_DAEMON_DAEMON_METRICS_H_
#define CHIMERA_WORKER_DAEMON_DAEMON_METRICS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "chimera/v1/service.pb.h"
#include "prometheus/collectable.h"
#include "prometheus/histogram.h"
#include "prometheus/metric_family.h"

namespace chimera::worker {

class DaemonMetrics : public prometheus::Collectable {
 public:
  // What a task's series are labelled with and measured against.
  struct TaskInfo {
    std::string job_id;
    int rank = 0;
    // The CUDA device it computes on; none on the CPU.
    std::optional<int> gpu;
    // Memory of the device it computes on.
    int64_t memory_limit_bytes = 0;
  };

  // `blas_core`: the OpenBLAS core its tasks run; empty for another BLAS.
  DaemonMetrics(std::string worker_id, std::string node, std::string blas_core);

  // All thread-safe.
  void SetRegistered(bool registered);
  void HeartbeatFailed();
  void TaskStarted(TaskInfo task);
  void StepDone(const chimera::v1::WorkerStepMetrics& step);
  // `outcome`: "succeeded", "failed" or "stopped".
  void TaskEnded(const std::string& outcome);

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  struct RunningTask {
    explicit RunningTask(TaskInfo task);

    TaskInfo info;
    std::optional<chimera::v1::WorkerStepMetrics> last_step;
    // Summed over the task's steps.
    chimera::v1::SecondsByOp seconds_by_op;
    prometheus::Histogram step_durations;
  };

  void CollectDaemon(std::vector<prometheus::MetricFamily>& families) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void CollectLastStep(std::vector<prometheus::MetricFamily>& families) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void CollectTaskTotals(std::vector<prometheus::MetricFamily>& families) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  std::vector<prometheus::ClientMetric::Label> TaskLabels() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const std::string worker_id_;
  const std::string node_;
  const std::string blas_core_;
  mutable absl::Mutex mutex_;
  bool registered_ ABSL_GUARDED_BY(mutex_) = false;
  double heartbeat_failures_ ABSL_GUARDED_BY(mutex_) = 0;
  double steps_ ABSL_GUARDED_BY(mutex_) = 0;
  std::map<std::string, double> tasks_by_outcome_ ABSL_GUARDED_BY(mutex_);
  std::optional<RunningTask> task_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_DAEMON_DAEMON_METRICS_H_
