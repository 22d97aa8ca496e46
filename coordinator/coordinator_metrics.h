// The coordinator's Prometheus metrics, computed when scraped from the job
// store and the worker registry (so they can never drift from them):
//   chimera_jobs{state}                                       gauge
//   chimera_workers{state}                                    gauge
//   chimera_worker_last_heartbeat_timestamp_seconds{worker}   gauge
//   chimera_build_info{version}                               gauge (1)
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
