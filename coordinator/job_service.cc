#include "coordinator/job_service.h"

#include <algorithm>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "coordinator/grpc_util.h"

namespace chimera::coordinator {
namespace {

// How often a TraceJob call checks whether its client went away while
// nothing changes.
constexpr absl::Duration kTracePollInterval = absl::Milliseconds(500);
constexpr int kDefaultTopK = 10;
// ListJobs pages: what a page holds unless asked otherwise, and the most it
// may; 2 MiB keeps a page of 64 KiB jobs far below any client's message
// limit.
constexpr int kDefaultJobsPerPage = 500;
constexpr int kMaxJobsPerPage = 1000;
constexpr int64_t kMaxPageBytes = int64_t{2} << 20;
// The longest a TraceJob call waits, whatever its deadline.
constexpr absl::Duration kMaxTraceWait = absl::Minutes(10);

grpc::Status RequireJobId(const std::string& id) {
  return id.empty() ? grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job_id is required")
                    : grpc::Status::OK;
}

}  // namespace

JobServiceImpl::JobServiceImpl(JobManager* jobs, WorkerRegistry* workers,
                               const absl::Notification* stopping)
    : jobs_(jobs),
      workers_(workers),
      stopping_(stopping),
      followers_(jobs, stopping) {}

grpc::Status JobServiceImpl::SubmitJob(grpc::ServerContext*,
                                       const chimera::v1::SubmitJobRequest* request,
                                       chimera::v1::Job* response) {
  CHIMERA_RETURN_IF_GRPC_ERROR(CheckRequestSize(*request, kMaxJobRequestBytes, "SubmitJob"));
  absl::StatusOr<chimera::v1::Job> job =
      jobs_->Submit(request->job(), request->profile());
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::GetJob(grpc::ServerContext*,
                                    const chimera::v1::GetJobRequest* request,
                                    chimera::v1::Job* response) {
  CHIMERA_RETURN_IF_GRPC_ERROR(CheckRequestSize(*request, kMaxSmallRequestBytes, "GetJob"));
  CHIMERA_RETURN_IF_GRPC_ERROR(RequireJobId(request->job_id()));
  absl::StatusOr<chimera::v1::Job> job = jobs_->Get(request->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::ListJobs(grpc::ServerContext*,
                                      const chimera::v1::ListJobsRequest* request,
                                      chimera::v1::ListJobsResponse* response) {
  CHIMERA_RETURN_IF_GRPC_ERROR(CheckRequestSize(*request, kMaxSmallRequestBytes, "ListJobs"));
  if (!chimera::v1::JobState_IsValid(request->state())) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("state: ", request->state(), " is not a JobState"));
  }
  const int page_size =
      request->page_size() == 0 ? kDefaultJobsPerPage : request->page_size();
  if (page_size < 1 || page_size > kMaxJobsPerPage) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("page_size: ", request->page_size(),
                                     " must be in [0, ", kMaxJobsPerPage, "]"));
  }
  int64_t after_seq = 0;
  if (!request->page_token().empty() &&
      !(absl::SimpleAtoi(request->page_token(), &after_seq) && after_seq > 0)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "page_token: not a next_page_token of ListJobs");
  }
  absl::StatusOr<JobManager::JobPage> page =
      jobs_->ListPage(request->state(), after_seq, page_size, kMaxPageBytes);
  if (!page.ok()) return ToGrpcStatus(page.status());
  for (chimera::v1::Job& job : page->jobs) *response->add_jobs() = std::move(job);
  if (page->next_after_seq > 0) {
    response->set_next_page_token(absl::StrCat(page->next_after_seq));
  }
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::StopJob(grpc::ServerContext*,
                                     const chimera::v1::StopJobRequest* request,
                                     chimera::v1::Job* response) {
  CHIMERA_RETURN_IF_GRPC_ERROR(CheckRequestSize(*request, kMaxSmallRequestBytes, "StopJob"));
  CHIMERA_RETURN_IF_GRPC_ERROR(RequireJobId(request->job_id()));
  absl::StatusOr<chimera::v1::Job> job = jobs_->Stop(request->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::DeleteJob(grpc::ServerContext*,
                                       const chimera::v1::DeleteJobRequest* request,
                                       chimera::v1::DeleteJobResponse*) {
  CHIMERA_RETURN_IF_GRPC_ERROR(CheckRequestSize(*request, kMaxSmallRequestBytes, "DeleteJob"));
  CHIMERA_RETURN_IF_GRPC_ERROR(RequireJobId(request->job_id()));
  return ToGrpcStatus(jobs_->Delete(request->job_id()));
}

grpc::Status JobServiceImpl::PlanJob(grpc::ServerContext* context,
                                     const chimera::v1::PlanJobRequest* request,
                                     chimera::v1::PlanJobResponse* response) {
  CHIMERA_RETURN_IF_GRPC_ERROR(CheckRequestSize(*request, kMaxJobRequestBytes, "PlanJob"));
  if (request->top_k() < 0) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("top_k: ", request->top_k(), " must be >= 0"));
  }
  absl::StatusOr<std::vector<chimera::v1::Plan>> plans =
      jobs_->Plans(request->job(), request->top_k() > 0 ? request->top_k() : kDefaultTopK,
                   [context] { return context->IsCancelled(); });
  if (!plans.ok()) return ToGrpcStatus(plans.status());
  for (chimera::v1::Plan& plan : *plans) *response->add_candidates() = std::move(plan);
  return grpc::Status::OK;
}

grpc::ServerWriteReactor<chimera::v1::JobEvent>* JobServiceImpl::WatchJob(
    grpc::CallbackServerContext*, const chimera::v1::WatchJobRequest* request) {
  grpc::Status refused = CheckRequestSize(*request, kMaxSmallRequestBytes, "WatchJob");
  if (refused.ok()) refused = RequireJobId(request->job_id());
  return followers_.Open(*request, refused);
}

grpc::Status JobServiceImpl::TraceJob(
    grpc::ServerContext* context, const chimera::v1::TraceJobRequest* request,
    chimera::v1::JobTrace* response) {
  CHIMERA_RETURN_IF_GRPC_ERROR(CheckRequestSize(*request, kMaxSmallRequestBytes, "TraceJob"));
  CHIMERA_RETURN_IF_GRPC_ERROR(RequireJobId(request->job_id()));
  const std::string& id = request->job_id();
  const absl::StatusOr<int> from = jobs_->BeginTrace(
      id,
      request->has_step() ? std::optional<int>(request->step()) : std::nullopt);
  if (!from.ok()) return ToGrpcStatus(from.status());
  // Every way out ends the wait, so the ranks stop recording.
  struct EndTrace {
    JobManager* jobs;
    const std::string& id;
    int from;
    ~EndTrace() { jobs->EndTrace(id, from); }
  } end_trace{jobs_, id, *from};
  const absl::Time deadline = std::min(absl::FromChrono(context->deadline()),
                                       absl::Now() + kMaxTraceWait);
  while (!context->IsCancelled() && !stopping_->HasBeenNotified()) {
    const uint64_t version = jobs_->version();
    absl::StatusOr<std::optional<chimera::v1::JobTrace>> trace =
        jobs_->TraceOf(id, *from);
    if (!trace.ok()) return ToGrpcStatus(trace.status());
    if (*trace) {
      *response = **std::move(trace);
      return grpc::Status::OK;
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                          absl::StrCat("no step >= ", *from, " of job ", id,
                                       " was recorded by every rank in time"));
    }
    jobs_->WaitForChange(version, std::min(kTracePollInterval, deadline - now));
  }
  return grpc::Status(
      grpc::StatusCode::UNAVAILABLE,
      "the coordinator is shutting down or the client went away");
}

grpc::Status JobServiceImpl::ListWorkers(grpc::ServerContext*,
                                         const chimera::v1::ListWorkersRequest* request,
                                         chimera::v1::ListWorkersResponse* response) {
  CHIMERA_RETURN_IF_GRPC_ERROR(CheckRequestSize(*request, kMaxSmallRequestBytes, "ListWorkers"));
  for (chimera::v1::WorkerInfo& worker : workers_->List()) {
    *response->add_workers() = std::move(worker);
  }
  return grpc::Status::OK;
}

}  // namespace chimera::coordinator
