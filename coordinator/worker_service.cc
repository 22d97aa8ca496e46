#include "coordinator/worker_service.h"

#include <cmath>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/field_errors.h"
#include "common/logging.h"
#include "coordinator/assignment_stream.h"
#include "coordinator/grpc_util.h"
#include "net/server_address.h"

namespace chimera::coordinator {
namespace {

// Bounds on what a worker may register: its id and node are host or pod
// names (DNS names are at most 253 characters); a machine has a few devices.
constexpr size_t kMaxNameLength = 253;
constexpr size_t kMaxAddressLength = 261;  // a DNS name, ':' and a port
constexpr int kMaxDevices = 64;
constexpr int kMaxDeviceIndex = 1023;
// More cores than any host has is a malformed registration.
constexpr int kMaxCpuCores = 1 << 16;

bool IsNameCharacter(char c) {
  return absl::ascii_isalnum(c) || c == '-' || c == '.' || c == '_';
}

void CheckName(absl::string_view field, const std::string& name, bool required,
               FieldErrors& errors) {
  if (name.empty()) {
    if (required) errors.Add(field, "is required");
  } else if (name.size() > kMaxNameLength) {
    errors.Add(field, absl::StrCat("has ", name.size(), " characters; at most ",
                                   kMaxNameLength));
  } else if (!absl::c_all_of(name, IsNameCharacter)) {
    errors.Add(field, absl::StrCat("'", name,
                                   "' may hold only letters, digits, '-', '.' and '_'"));
  }
}

void CheckDevices(const chimera::v1::RegisterWorkerRequest& request, FieldErrors& errors) {
  if (request.devices().empty() || request.devices_size() > kMaxDevices) {
    errors.Add("devices", absl::StrCat(request.devices_size(), " given; 1 to ", kMaxDevices));
    return;
  }
  for (int i = 0; i < request.devices_size(); ++i) {
    const chimera::v1::Device& device = request.devices(i);
    const std::string field = absl::StrCat("devices[", i, "]");
    if (device.kind() != "cpu" && device.kind() != "gpu") {
      errors.Add(field + ".kind", absl::StrCat("'", device.kind().substr(0, 16),
                                               "' is not one of cpu, gpu"));
    }
    if (device.index() < 0 || device.index() > kMaxDeviceIndex) {
      errors.Add(field + ".index",
                 absl::StrCat(device.index(), " is outside [0, ", kMaxDeviceIndex, "]"));
    }
    if (device.memory_bytes() < 0) {
      errors.Add(field + ".memoryBytes", absl::StrCat(device.memory_bytes(), " must be >= 0"));
    }
    if (!(device.peak_flops() >= 0) || std::isinf(device.peak_flops())) {
      errors.Add(field + ".peakFlops",
                 absl::StrCat(device.peak_flops(), " must be finite and >= 0"));
    }
  }
}

void CheckHeldTask(const chimera::v1::HeldTask& task, FieldErrors& errors) {
  CheckName("task.jobId", task.job_id(), /*required=*/true, errors);
  if (task.attempt() < 1) {
    errors.Add("task.attempt", absl::StrCat(task.attempt(), " must be >= 1"));
  }
  if (task.rank() < 0) {
    errors.Add("task.rank", absl::StrCat(task.rank(), " must be >= 0"));
  }
  if (task.state() != chimera::v1::TASK_STATE_RUNNING &&
      task.state() != chimera::v1::TASK_STATE_SUCCEEDED &&
      task.state() != chimera::v1::TASK_STATE_FAILED &&
      task.state() != chimera::v1::TASK_STATE_STOPPED) {
    const std::string& name = chimera::v1::TaskState_Name(task.state());
    errors.Add("task.state",
               absl::StrCat(name.empty() ? absl::StrCat(task.state()) : name,
                            " is not one of RUNNING, SUCCEEDED, FAILED, STOPPED"));
  }
  // Daemons cut what they hold to what a job's status keeps.
  if (task.message().size() > kMaxTaskMessageBytes) {
    errors.Add("task.message", absl::StrCat("has ", task.message().size(),
                                            " bytes; at most ", kMaxTaskMessageBytes));
  }
}

// INVALID_ARGUMENT naming every field of `request` that no real worker sends.
absl::Status CheckRegistration(const chimera::v1::RegisterWorkerRequest& request) {
  FieldErrors errors;
  CheckName("workerId", request.worker_id(), /*required=*/true, errors);
  CheckName("node", request.node(), /*required=*/false, errors);
  if (request.incarnation() == 0) {
    errors.Add("incarnation", "must be a non-zero random number");
  }
  if (request.memory_bytes() <= 0) {
    errors.Add("memoryBytes", absl::StrCat(request.memory_bytes(), " must be > 0"));
  }
  if (request.cpu_cores() < 0 || request.cpu_cores() > kMaxCpuCores) {
    errors.Add("cpuCores",
               absl::StrCat(request.cpu_cores(), " is outside [0, ", kMaxCpuCores, "]"));
  }
  // Other workers dial it, joined with a port: it holds neither a port nor
  // anything a name or address does not.
  if (request.host().empty()) {
    errors.Add("host", "is required");
  } else if (!net::IsHostNameOrAddress(request.host())) {
    errors.Add("host", absl::StrCat("'", absl::CHexEscape(request.host().substr(0, kMaxNameLength)),
                                    "' is not a host name or an IP address (no port, no "
                                    "brackets)"));
  }
  if (request.metrics_address().size() > kMaxAddressLength) {
    errors.Add("metricsAddress", absl::StrCat("has ", request.metrics_address().size(),
                                              " characters; at most ", kMaxAddressLength));
  }
  CheckDevices(request, errors);
  if (request.has_task()) CheckHeldTask(request.task(), errors);
  return errors.ToStatus();
}

}  // namespace

WorkerServiceImpl::WorkerServiceImpl(JobManager* jobs, WorkerRegistry* workers,
                                     const absl::Notification* stopping)
    : jobs_(jobs), workers_(workers), stopping_(stopping) {}

grpc::Status WorkerServiceImpl::RegisterWorker(grpc::ServerContext*,
                                               const chimera::v1::RegisterWorkerRequest* request,
                                               chimera::v1::RegisterWorkerResponse* response) {
  CHIMERA_RETURN_IF_GRPC_ERROR(CheckRequestSize(*request, kMaxSmallRequestBytes, "RegisterWorker"));
  CHIMERA_RETURN_IF_GRPC_ERROR(ToGrpcStatus(CheckRegistration(*request)));
  absl::StatusOr<std::optional<TaskRef>> registered = workers_->Register(*request);
  if (!registered.ok()) {
    CHIMERA_LOG(WARNING) << registered.status();
    return ToGrpcStatus(registered.status());
  }
  const std::optional<TaskRef>& lost = *registered;
  CHIMERA_LOG(INFO) << "worker " << request->worker_id() << " registered (node "
                    << request->node() << ", incarnation " << request->incarnation() << ")";
  if (lost) {
    jobs_->OnWorkerLost(request->worker_id(), *lost,
                        "restarted (registered a new incarnation) while running its task");
  }
  // Asked after OnWorkerLost: the task of a job that just restarted is not
  // kept.
  response->set_keep_task(request->has_task() &&
                          jobs_->Adopt(request->worker_id(), request->task()));
  response->set_heartbeat_period_ms(absl::ToInt64Milliseconds(workers_->policy().period));
  response->set_heartbeat_timeout_ms(absl::ToInt64Milliseconds(workers_->policy().timeout));
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::Heartbeat(grpc::ServerContext*,
                                          const chimera::v1::HeartbeatRequest* request,
                                          chimera::v1::HeartbeatResponse*) {
  CHIMERA_RETURN_IF_GRPC_ERROR(CheckRequestSize(*request, kMaxSmallRequestBytes, "Heartbeat"));
  return ToGrpcStatus(workers_->Heartbeat(
      request->worker_id(), request->incarnation(), request->task_position()));
}

grpc::Status WorkerServiceImpl::ReportMetrics(
    grpc::ServerContext*,
    const chimera::v1::ReportMetricsRequest* request,
    chimera::v1::ReportMetricsResponse* response) {
  CHIMERA_RETURN_IF_GRPC_ERROR(
      CheckRequestSize(*request, kMaxMetricsRequestBytes, "ReportMetrics"));
  return ToGrpcStatus(jobs_->OnMetrics(*request, response));
}

grpc::Status WorkerServiceImpl::ReportTaskState(
    grpc::ServerContext*, const chimera::v1::ReportTaskStateRequest* request,
    chimera::v1::ReportTaskStateResponse*) {
  CHIMERA_RETURN_IF_GRPC_ERROR(
      CheckRequestSize(*request, kMaxSmallRequestBytes, "ReportTaskState"));
  return ToGrpcStatus(jobs_->OnTaskState(*request));
}

grpc::ServerWriteReactor<chimera::v1::Assignment>* WorkerServiceImpl::WatchAssignments(
    grpc::CallbackServerContext*, const chimera::v1::WatchAssignmentsRequest* request) {
  grpc::Status refused = CheckRequestSize(*request, kMaxSmallRequestBytes, "WatchAssignments");
  if (refused.ok()) {
    refused = ToGrpcStatus(workers_->CheckIncarnation(request->worker_id(), request->incarnation()));
  }
  return NewAssignmentStream(workers_, stopping_, *request, refused);
}

}  // namespace chimera::coordinator
