#include "coordinator/worker_service.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "coordinator/grpc_util.h"

namespace chimera::coordinator {
namespace {

// How often an assignment stream checks whether its worker went away while
// nothing is queued.
constexpr absl::Duration kAssignmentPollInterval = absl::Milliseconds(500);

}  // namespace

WorkerServiceImpl::WorkerServiceImpl(JobManager* jobs, WorkerRegistry* workers,
                                     std::string worker_token,
                                     const absl::Notification* stopping)
    : jobs_(jobs),
      workers_(workers),
      worker_token_(std::move(worker_token)),
      stopping_(stopping) {}

grpc::Status WorkerServiceImpl::RegisterWorker(grpc::ServerContext* context,
                                               const chimera::v1::RegisterWorkerRequest* request,
                                               chimera::v1::RegisterWorkerResponse* response) {
  CHIMERA_RETURN_IF_GRPC_ERROR(CheckToken(*context, worker_token_));
  if (request->worker_id().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "worker_id is required");
  }
  if (request->incarnation() == 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "incarnation must be a non-zero random number");
  }
  if (request->devices().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "devices: at least one is required");
  }
  std::optional<TaskRef> lost = workers_->Register(*request);
  CHIMERA_LOG(INFO) << "worker " << request->worker_id() << " registered (node "
                    << request->node() << ", incarnation " << request->incarnation() << ")";
  if (lost) {
    jobs_->OnWorkerLost(request->worker_id(), *lost,
                        "restarted (registered a new incarnation) while running its task");
  }
  response->set_heartbeat_period_ms(absl::ToInt64Milliseconds(workers_->policy().period));
  response->set_heartbeat_timeout_ms(absl::ToInt64Milliseconds(workers_->policy().timeout));
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::Heartbeat(grpc::ServerContext* context,
                                          const chimera::v1::HeartbeatRequest* request,
                                          chimera::v1::HeartbeatResponse*) {
  CHIMERA_RETURN_IF_GRPC_ERROR(CheckToken(*context, worker_token_));
  return ToGrpcStatus(workers_->Heartbeat(request->worker_id(), request->incarnation()));
}

grpc::Status WorkerServiceImpl::ReportMetrics(
    grpc::ServerContext* context,
    const chimera::v1::ReportMetricsRequest* request,
    chimera::v1::ReportMetricsResponse* response) {
  CHIMERA_RETURN_IF_GRPC_ERROR(CheckToken(*context, worker_token_));
  return ToGrpcStatus(jobs_->OnMetrics(*request, response));
}

grpc::Status WorkerServiceImpl::ReportTaskState(
    grpc::ServerContext* context, const chimera::v1::ReportTaskStateRequest* request,
    chimera::v1::ReportTaskStateResponse*) {
  CHIMERA_RETURN_IF_GRPC_ERROR(CheckToken(*context, worker_token_));
  return ToGrpcStatus(jobs_->OnTaskState(*request));
}

grpc::Status WorkerServiceImpl::WatchAssignments(
    grpc::ServerContext* context, const chimera::v1::WatchAssignmentsRequest* request,
    grpc::ServerWriter<chimera::v1::Assignment>* writer) {
  CHIMERA_RETURN_IF_GRPC_ERROR(CheckToken(*context, worker_token_));
  CHIMERA_RETURN_IF_GRPC_ERROR(ToGrpcStatus(
      workers_->CheckIncarnation(request->worker_id(), request->incarnation())));
  while (!context->IsCancelled() && !stopping_->HasBeenNotified()) {
    absl::StatusOr<std::optional<chimera::v1::Assignment>> next = workers_->NextAssignment(
        request->worker_id(), request->incarnation(), kAssignmentPollInterval);
    if (!next.ok()) return ToGrpcStatus(next.status());
    if (*next && !writer->Write(**next)) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "assignment stream broke");
    }
  }
  // UNAVAILABLE tells the worker to reconnect (to a restarted coordinator).
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      "the coordinator is shutting down or the worker went away");
}

}  // namespace chimera::coordinator
