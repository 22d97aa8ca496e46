#include "client/coordinator_client.h"

#include <google/protobuf/unknown_field_set.h>
#include <grpcpp/generic/generic_stub.h>

#include "absl/strings/str_cat.h"
#include "common/environment.h"
#include "common/status_macros.h"
#include "net/grpc_status.h"
#include "net/server_address.h"

namespace chimera::client {
namespace {

// The coordinator's answer, with the words a user needs where it could not
// be reached or did not answer.
absl::Status FromGrpc(const grpc::Status& status, absl::string_view address) {
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return absl::UnavailableError(absl::StrCat(
        "cannot reach the coordinator at ", address, " (",
        status.error_message(), ")"));
  }
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return absl::DeadlineExceededError(absl::StrCat(
        "the coordinator at ", address, " did not answer in time"));
  }
  return net::FromGrpcStatus(status);
}

// Sends `request` to `method` over `channel` untyped, so that calling a
// service of another package (grpc.health.v1) needs no generated code.
grpc::Status UntypedUnaryCall(const std::shared_ptr<grpc::Channel>& channel,
                              grpc::ClientContext* context,
                              const std::string& method,
                              const std::string& request,
                              std::string* response) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue queue;
  grpc::Slice request_slice(request);
  grpc::ByteBuffer request_bytes(&request_slice, 1);
  auto call = stub.PrepareUnaryCall(context, method, request_bytes, &queue);
  call->StartCall();
  grpc::ByteBuffer reply;
  grpc::Status status;
  call->Finish(&reply, &status, /*tag=*/nullptr);
  void* tag = nullptr;
  bool ok = false;
  queue.Next(&tag, &ok);
  std::vector<grpc::Slice> slices;
  if (status.ok() && reply.Dump(&slices).ok()) {
    for (const grpc::Slice& slice : slices) {
      response->append(reinterpret_cast<const char*>(slice.begin()),
                       slice.size());
    }
  }
  queue.Shutdown();
  while (queue.Next(&tag, &ok)) {
  }
  return status;
}

// grpc.health.v1.HealthCheckResponse.status (field 1): 0 UNKNOWN, 1 SERVING,
// 2 NOT_SERVING, 3 SERVICE_UNKNOWN; -1 when `response` is not such a
// message.
int HealthStatusOf(const std::string& response) {
  google::protobuf::UnknownFieldSet fields;
  if (!fields.ParseFromString(response)) return -1;
  int status = 0;  // A default field is not sent at all.
  for (int i = 0; i < fields.field_count(); ++i) {
    const google::protobuf::UnknownField& field = fields.field(i);
    if (field.number() != 1) continue;
    if (field.type() != google::protobuf::UnknownField::TYPE_VARINT) return -1;
    status = static_cast<int>(field.varint());
  }
  return status;
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
      channel_(grpc::CreateChannel(options_.address, std::move(credentials))),
      stub_(chimera::v1::JobService::NewStub(channel_)) {}

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

absl::Status CoordinatorClient::CheckHealth() {
  std::string response;
  // An empty HealthCheckRequest asks about the whole server.
  RETURN_IF_ERROR(
      FromGrpc(UntypedUnaryCall(channel_, Context().get(),
                                "/grpc.health.v1.Health/Check", "", &response),
               address()));
  constexpr const char* kNames[] = {"UNKNOWN", "SERVING", "NOT_SERVING",
                                    "SERVICE_UNKNOWN"};
  const int status = HealthStatusOf(response);
  if (status == 1) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat("the coordinator at ", address(), " answers ",
                   status >= 0 && status <= 3 ? kNames[status]
                                              : "a malformed health status"));
}

absl::StatusOr<chimera::v1::Job> CoordinatorClient::Submit(
    const chimera::v1::TrainJob& manifest,
    const chimera::v1::ModelProfile& profile) {
  chimera::v1::SubmitJobRequest request;
  *request.mutable_job() = manifest;
  *request.mutable_profile() = profile;
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
  std::vector<chimera::v1::Job> jobs;
  // Page by page, each call with its own deadline.
  do {
    chimera::v1::ListJobsResponse response;
    RETURN_IF_ERROR(FromGrpc(
        stub_->ListJobs(Context().get(), request, &response), address()));
    jobs.insert(jobs.end(), response.jobs().begin(), response.jobs().end());
    request.set_page_token(response.next_page_token());
  } while (!request.page_token().empty());
  return jobs;
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
