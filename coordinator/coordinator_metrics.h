// The coordinator's Prometheus metrics, computed when scraped from the job
// store and the worker registry (so they can never drift from them), and
// the recoveries the job manager counted since it started:
//   chimera_jobs{state}                                       gauge
//   chimera_workers{state}                                    gauge
//   chimera_worker_last_heartbeat_timestamp_seconds{worker}   gauge
//   chimera_build_info{version}                               gauge (1)
//   chimera_job_recoveries_total{cause}                       counter
//   chimera_job_recovery_duration_seconds                     histogram
// and, per running job (label train_job, the job id): its plan
// (chimera_job_plan_info), what the simulator predicted for it
// (chimera_job_predicted_*), its last step (chimera_job_step, _loss,
// _step_seconds, _samples_per_second, _model_flops_per_second,
// _tokens_per_second, _last_step_timestamp_seconds), its model FLOPs
// utilisation where its workers report their peak
// (chimera_job_model_flops_utilization) and each rank's bubble
// ratio (chimera_job_bubble_ratio{rank,worker}). docs/operations.md describes
// each.
#ifndef CHIMERA_COORDINATOR_COORDINATOR_METRICS_H_
#define CHIMERA_COORDINATOR_COORDINATOR_METRICS_H_

#include <vector>

#include "coordinator/job_manager.h"
#include "coordinator/worker_registry.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace chimera::coordinator {

class CoordinatorMetrics : public prometheus::Collectable {
 public:
  // Both must outlive this object.
  CoordinatorMetrics(JobManager* jobs, const WorkerRegistry* workers)
      : jobs_(jobs), workers_(workers) {}

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  JobManager* const jobs_;
  const WorkerRegistry* const workers_;
};

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_COORDINATOR_METRICS_H_
