// chimera.v1.WorkerService: what worker daemons call, once TokenGate has let
// them in with the worker token. Each handler bounds its request
// (RESOURCE_EXHAUSTED) and checks the caller's incarnation (ABORTED when
// stale: the worker must register again).
#ifndef CHIMERA_COORDINATOR_WORKER_SERVICE_H_
#define CHIMERA_COORDINATOR_WORKER_SERVICE_H_

#include <string>

#include "absl/synchronization/notification.h"

#include "chimera/v1/service.grpc.pb.h"
#include "coordinator/job_manager.h"
#include "coordinator/worker_registry.h"

namespace chimera::coordinator {

// WatchAssignments is a callback stream (assignment_stream.h): it holds no
// thread while it waits, and a coordinator has one per worker.
class WorkerServiceImpl final
    : public chimera::v1::WorkerService::WithCallbackMethod_WatchAssignments<
          chimera::v1::WorkerService::Service> {
 public:
  // Streams end once `stopping` is notified and the registry rings them all,
  // so the server can shut down promptly.
  WorkerServiceImpl(JobManager* jobs, WorkerRegistry* workers,
                    const absl::Notification* stopping);

  grpc::Status RegisterWorker(grpc::ServerContext* context,
                              const chimera::v1::RegisterWorkerRequest* request,
                              chimera::v1::RegisterWorkerResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context,
                         const chimera::v1::HeartbeatRequest* request,
                         chimera::v1::HeartbeatResponse* response) override;
  grpc::Status ReportMetrics(grpc::ServerContext* context,
                             const chimera::v1::ReportMetricsRequest* request,
                             chimera::v1::ReportMetricsResponse* response) override;
  grpc::Status ReportTaskState(grpc::ServerContext* context,
                               const chimera::v1::ReportTaskStateRequest* request,
                               chimera::v1::ReportTaskStateResponse* response) override;
  grpc::ServerWriteReactor<chimera::v1::Assignment>* WatchAssignments(
      grpc::CallbackServerContext* context,
      const chimera::v1::WatchAssignmentsRequest* request) override;

 private:
  JobManager* const jobs_;
  WorkerRegistry* const workers_;
  const absl::Notification* const stopping_;
};

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_WORKER_SERVICE_H_
