// The coordinator's request handling as gRPC delivers it: the first byte
// picks a JobService or WorkerService method, the rest are its request's
// bytes, and the handler runs against one in-memory coordinator that lives
// across inputs (jobs submitted and workers registered by earlier inputs
// stay). Any status is a fine answer; a crash, sanitizer report or hang is
// a bug. TraceJob and the streams wait by design and are left out.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/strings/string_view.h"
#include "absl/synchronization/notification.h"
#include "coordinator/job_manager.h"
#include "coordinator/job_service.h"
#include "coordinator/job_store.h"
#include "coordinator/worker_registry.h"
#include "coordinator/worker_service.h"

namespace chimera::coordinator {
namespace {

// What a coordinator process wires together, without the server.
struct Coordinator {
  Coordinator()
      : store(*JobStore::Open(":memory:")),
        registry({}),
        jobs(store.get(), &registry, Options()),
        job_service(&jobs, &registry, &stopping),
        worker_service(&jobs, &registry, &stopping) {}

  static JobManagerOptions Options() {
    JobManagerOptions options;
    // Bounds how big a job can get to be planned.
    options.max_workers = 16;
    return options;
  }

  absl::Notification stopping;
  std::unique_ptr<JobStore> store;
  WorkerRegistry registry;
  JobManager jobs;
  JobServiceImpl job_service;
  WorkerServiceImpl worker_service;
};

// Runs `method` of `service` on `bytes` when they parse as its request
// (gRPC refuses the others before any handler sees them).
template <typename Service, typename Request, typename Response>
void Call(Service& service,
          grpc::Status (Service::*method)(grpc::ServerContext*, const Request*, Response*),
          absl::string_view bytes) {
  Request request;
  if (!request.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return;
  grpc::ServerContext context;
  Response response;
  (service.*method)(&context, &request, &response).error_code();
}

}  // namespace
}  // namespace chimera::coordinator

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace chimera::coordinator;
  static Coordinator* const coordinator = new Coordinator();
  if (size == 0) return 0;
  const absl::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  JobServiceImpl& jobs = coordinator->job_service;
  WorkerServiceImpl& workers = coordinator->worker_service;
  switch (data[0] % 12) {
    case 0: Call(jobs, &JobServiceImpl::SubmitJob, bytes); break;
    case 1: Call(jobs, &JobServiceImpl::GetJob, bytes); break;
    case 2: Call(jobs, &JobServiceImpl::ListJobs, bytes); break;
    case 3: Call(jobs, &JobServiceImpl::StopJob, bytes); break;
    case 4: Call(jobs, &JobServiceImpl::DeleteJob, bytes); break;
    case 5: Call(jobs, &JobServiceImpl::PlanJob, bytes); break;
    case 6: Call(jobs, &JobServiceImpl::ListWorkers, bytes); break;
    case 7: Call(workers, &WorkerServiceImpl::RegisterWorker, bytes); break;
    case 8: Call(workers, &WorkerServiceImpl::Heartbeat, bytes); break;
    case 9: Call(workers, &WorkerServiceImpl::ReportMetrics, bytes); break;
    case 10: Call(workers, &WorkerServiceImpl::ReportTaskState, bytes); break;
    // A scheduling tick: queued jobs start on the registered workers.
    default: coordinator->jobs.Tick(); break;
  }
  return 0;
}
