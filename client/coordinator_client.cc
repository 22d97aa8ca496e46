#include "client/coordinator_client.h"

#include "absl/strings/str_cat.h"
#include "common/environment.h"
#include "common/status_macros.h"
#include "net/server_address.h"

namespace chimera::client {
namespace {

absl::Status FromGrpc(const grpc::Status& status, absl::string_view address) {
  if (status.ok()) return absl::OkStatus();
  std::string message = status.error_message();
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    message = absl::StrCat("cannot reach the coordinator at ", address, " (",
                           message, ")");
  } else if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    message =
        absl::StrCat("the coordinator at ", address, " did not answer in time");
  }
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      message);
}

}  // namespace

std::string DescribeError(const absl::Status& status) {
  return absl::StrCat(absl::StatusCodeToString(status.code()), ": ",
                      status.message());
}

absl::StatusOr<std::unique_ptr<CoordinatorClient>> CoordinatorClient::Connect(
    ConnectionOptions options) {
  options.address =
      OrEnvironment(options.address, "CHIMERA_ADDRESS", kDefaultAddress);
  if (absl::Status valid = net::ParseDialAddress(options.address).status();
      !valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--address (or $CHIMERA_ADDRESS): ", valid.message()));
  }
  options.token = OrEnvironment(options.token, "CHIMERA_TOKEN");
  options.tls.ca = OrEnvironment(options.tls.ca, "CHIMERA_TLS_CA");
  options.tls.certificate =
      OrEnvironment(options.tls.certificate, "CHIMERA_TLS_CERT");
  options.tls.private_key =
      OrEnvironment(options.tls.private_key, "CHIMERA_TLS_KEY");
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> credentials,
                   net::ChannelCredentials(options.tls));
  return std::unique_ptr<CoordinatorClient>(
      new CoordinatorClient(std::move(options), std::move(credentials)));
}

CoordinatorClient::CoordinatorClient(
    ConnectionOptions options,
    std::shared_ptr<grpc::ChannelCredentials> credentials)
    : options_(std::move(options)),
      stub_(chimera::v1::JobService::NewStub(
          grpc::CreateChannel(options_.address, std::move(credentials)))) {}

std::unique_ptr<grpc::ClientContext> CoordinatorClient::Context(
    bool with_deadline) const {
  auto context = std::make_unique<grpc::ClientContext>();
  if (with_deadline) {
    context->set_deadline(
        absl::ToChronoTime(absl::Now() + options_.call_timeout));
  }
  if (!options_.token.empty()) {
    context->AddMetadata("authorization", "Bearer " + options_.token);
  }
  return context;
}

absl::StatusOr<chimera::v1::Job> CoordinatorClient::Submit(
    const chimera::v1::TrainJob& manifest) {
  chimera::v1::SubmitJobRequest request;
  *request.mutable_job() = manifest;
  chimera::v1::Job job;
  RETURN_IF_ERROR(
      FromGrpc(stub_->SubmitJob(Context().get(), request, &job), address()));
  return job;
}

absl::StatusOr<chimera::v1::Job> CoordinatorClient::Get(const std::string& id) {
  chimera::v1::GetJobRequest request;
  request.set_job_id(id);
  chimera::v1::Job job;
  RETURN_IF_ERROR(
      FromGrpc(stub_->GetJob(Context().get(), request, &job), address()));
  return job;
}

absl::StatusOr<std::vector<chimera::v1::Job>> CoordinatorClient::List(
    chimera::v1::JobState state) {
  chimera::v1::ListJobsRequest request;
  request.set_state(state);
  chimera::v1::ListJobsResponse response;
  RETURN_IF_ERROR(FromGrpc(stub_->ListJobs(Context().get(), request, &response),
                           address()));
  return std::vector<chimera::v1::Job>(response.jobs().begin(),
                                       response.jobs().end());
}

absl::StatusOr<chimera::v1::Job> CoordinatorClient::Stop(
    const std::string& id) {
  chimera::v1::StopJobRequest request;
  request.set_job_id(id);
  chimera::v1::Job job;
  RETURN_IF_ERROR(
      FromGrpc(stub_->StopJob(Context().get(), request, &job), address()));
  return job;
}

absl::StatusOr<std::vector<chimera::v1::WorkerInfo>>
CoordinatorClient::Workers() {
  chimera::v1::ListWorkersResponse response;
  RETURN_IF_ERROR(
      FromGrpc(stub_->ListWorkers(Context().get(),
                                  chimera::v1::ListWorkersRequest(), &response),
               address()));
  return std::vector<chimera::v1::WorkerInfo>(response.workers().begin(),
                                              response.workers().end());
}

absl::StatusOr<chimera::v1::JobTrace> CoordinatorClient::Trace(
    const std::string& id, std::optional<int> step, absl::Duration wait) {
  chimera::v1::TraceJobRequest request;
  request.set_job_id(id);
  if (step) request.set_step(*step);
  auto context = Context(/*with_deadline=*/false);
  context->set_deadline(absl::ToChronoTime(absl::Now() + wait));
  chimera::v1::JobTrace trace;
  const grpc::Status status = stub_->TraceJob(context.get(), request, &trace);
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return absl::DeadlineExceededError(absl::StrCat(
        "no trace of job ", id, " within ", absl::FormatDuration(wait),
        ": its ranks did not all finish ",
        step ? absl::StrCat("step ", *step, " or a later one") : "a step",
        " by then (is it still waiting for workers?)"));
  }
  RETURN_IF_ERROR(FromGrpc(status, address()));
  return trace;
}

absl::Status CoordinatorClient::Watch(
    const std::string& id, bool follow,
    const std::function<void(const chimera::v1::JobEvent&)>& on_event) {
  // The job must exist; this also fails fast when the coordinator is down.
  RETURN_IF_ERROR(Get(id).status());
  chimera::v1::WatchJobRequest request;
  request.set_job_id(id);
  auto context = Context(/*with_deadline=*/!follow);
  auto reader = stub_->WatchJob(context.get(), request);
  chimera::v1::JobEvent event;
  while (reader->Read(&event)) {
    on_event(event);
    if (!follow && event.has_status()) {
      context->TryCancel();
      break;
    }
  }
  const grpc::Status status = reader->Finish();
  if (!follow && status.error_code() == grpc::StatusCode::CANCELLED)
    return absl::OkStatus();
  return FromGrpc(status, address());
}

}  // namespace chimera::client
