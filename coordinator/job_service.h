// chimera.v1.JobService: what clients (the CLI) call, once TokenGate has let
// them in with the client token. Each handler bounds and validates its
// request and maps JobManager's statuses to gRPC codes (RESOURCE_EXHAUSTED,
// INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION).
#ifndef CHIMERA_COORDINATOR_JOB_SERVICE_H_
#define CHIMERA_COORDINATOR_JOB_SERVICE_H_

#include <string>

#include "absl/synchronization/notification.h"

#include "chimera/v1/service.grpc.pb.h"
#include "coordinator/job_event_streams.h"
#include "coordinator/job_manager.h"
#include "coordinator/worker_registry.h"

namespace chimera::coordinator {

// WatchJob is a callback stream (job_event_streams.h): a client following a
// job holds no thread while it waits.
class JobServiceImpl final
    : public chimera::v1::JobService::WithCallbackMethod_WatchJob<
          chimera::v1::JobService::Service> {
 public:
  // Streams end once `stopping` is notified and `jobs` wakes its waiters, so
  // the server can shut down promptly.
  JobServiceImpl(JobManager* jobs, WorkerRegistry* workers, const absl::Notification* stopping);

  grpc::Status SubmitJob(grpc::ServerContext* context,
                         const chimera::v1::SubmitJobRequest* request,
                         chimera::v1::Job* response) override;
  grpc::Status GetJob(grpc::ServerContext* context, const chimera::v1::GetJobRequest* request,
                      chimera::v1::Job* response) override;
  grpc::Status ListJobs(grpc::ServerContext* context,
                        const chimera::v1::ListJobsRequest* request,
                        chimera::v1::ListJobsResponse* response) override;
  grpc::Status StopJob(grpc::ServerContext* context, const chimera::v1::StopJobRequest* request,
                       chimera::v1::Job* response) override;
  grpc::Status DeleteJob(grpc::ServerContext* context,
                         const chimera::v1::DeleteJobRequest* request,
                         chimera::v1::DeleteJobResponse* response) override;
  grpc::Status PlanJob(grpc::ServerContext* context, const chimera::v1::PlanJobRequest* request,
                       chimera::v1::PlanJobResponse* response) override;
  grpc::ServerWriteReactor<chimera::v1::JobEvent>* WatchJob(
      grpc::CallbackServerContext* context, const chimera::v1::WatchJobRequest* request) override;
  grpc::Status ListWorkers(grpc::ServerContext* context,
                           const chimera::v1::ListWorkersRequest* request,
                           chimera::v1::ListWorkersResponse* response) override;
  // Waits for the trace within the call's deadline and at most
  // kMaxTraceWait; DEADLINE_EXCEEDED when none completes by then.
  grpc::Status TraceJob(grpc::ServerContext* context,
                        const chimera::v1::TraceJobRequest* request,
                        chimera::v1::JobTrace* response) override;

 private:
  JobManager* const jobs_;
  WorkerRegistry* const workers_;
  const absl::Notification* const stopping_;
  JobEventStreams followers_;
};

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_JOB_SERVICE_H_
