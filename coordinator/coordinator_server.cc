#include "coordinator/coordinator_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <chrono>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "coordinator/coordinator_metrics.h"
#include "coordinator/grpc_util.h"
#include "coordinator/token_gate.h"
#include "net/malformed_request.h"
#include "net/server_address.h"
#include "net/tls_credentials.h"

namespace chimera::coordinator {
namespace {

// In-flight calls get this long to finish at shutdown.
constexpr auto kShutdownGrace = std::chrono::seconds(1);
// The largest answer: a worker's StartTask, a page of jobs, a job's trace.
constexpr int kMaxResponseBytes = 16 << 20;

// OK for no token or a usable one; INVALID_ARGUMENT naming the flag and the
// environment variable that give it otherwise.
absl::Status CheckTokenStrength(const std::string& token, absl::string_view flag,
                                absl::string_view variable) {
  if (token.empty()) return absl::OkStatus();
  const std::string name = absl::StrCat(flag, " (or ", variable, ")");
  // gRPC carries it as a header value, which no client can send with a line
  // break or a byte beyond ASCII in it (a secret read from a file often ends
  // with a line break).
  if (!absl::c_all_of(token, [](char c) { return c >= 0x20 && c <= 0x7e; })) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " holds a character that is not printable ASCII (a line break?); no "
              "client could send it"));
  }
  if (absl::StripAsciiWhitespace(token).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is only spaces"));
  }
  if (token.size() < kMinTokenBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " is too short: ", token.size(), " of the at least ", kMinTokenBytes,
                     " characters a token needs (`openssl rand -hex 16` makes one)"));
  }
  return absl::OkStatus();
}

// Whether `options` say who may call a coordinator on `address` in a way
// it accepts.
absl::Status CheckAccess(const CoordinatorOptions& options, const net::ServerAddress& address) {
  if (!address.IsLoopback() &&
      (options.client_token.empty() || options.worker_token.empty())) {
    return absl::InvalidArgumentError(
        absl::StrCat("refusing to serve on non-loopback host '", address.host,
                     "' without a client token and a worker token"));
  }
  RETURN_IF_ERROR(
      CheckTokenStrength(options.client_token, "--client-token", "CHIMERA_CLIENT_TOKEN"));
  RETURN_IF_ERROR(
      CheckTokenStrength(options.worker_token, "--worker-token", "CHIMERA_WORKER_TOKEN"));
  // A worker's token must not submit or stop jobs, nor a client's join as a
  // worker and be sent the jobs' programs.
  if (!options.client_token.empty() && options.client_token == options.worker_token) {
    return absl::InvalidArgumentError(
        "--client-token and --worker-token (or CHIMERA_CLIENT_TOKEN and "
        "CHIMERA_WORKER_TOKEN) are the same; give each role a token of its own");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    const CoordinatorOptions& options) {
  ASSIGN_OR_RETURN(net::ServerAddress address, net::ParseServerAddress(options.listen));
  RETURN_IF_ERROR(CheckAccess(options, address));
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                   net::ServerCredentials(options.tls));
  std::unique_ptr<CoordinatorServer> server(new CoordinatorServer());
  RETURN_IF_ERROR(server->OpenJobs(options));
  // Before gRPC reads a request: a caller without its token never costs the
  // coordinator more than its headers.
  credentials->SetAuthMetadataProcessor(
      std::make_shared<TokenGate>(options.client_token, options.worker_token));
  RETURN_IF_ERROR(server->Listen(std::move(address), credentials));
  ASSIGN_OR_RETURN(server->metrics_, net::StartMetrics(options.metrics));
  if (server->metrics_) {
    server->metrics_->Add(std::make_shared<CoordinatorMetrics>(
        server->jobs_.get(), server->registry_.get()));
  }
  const absl::Duration period = options.heartbeat.period / 2;
  server->loop_ =
      std::thread([raw = server.get(), period] { raw->RunLoop(period); });
  CHIMERA_LOG(INFO) << "coordinator serving on " << server->address_
                    << " (store " << options.database << ")";
  return server;
}

absl::Status CoordinatorServer::OpenJobs(const CoordinatorOptions& options) {
  ASSIGN_OR_RETURN(store_, JobStore::Open(options.database));
  RETURN_IF_ERROR(store_->LimitSize(options.database_max_bytes));
  registry_ = std::make_unique<WorkerRegistry>(options.heartbeat);
  jobs_ = std::make_unique<JobManager>(store_.get(), registry_.get(), options.jobs);
  RETURN_IF_ERROR(jobs_->Recover());
  job_service_ =
      std::make_unique<JobServiceImpl>(jobs_.get(), registry_.get(), &stopping_);
  worker_service_ =
      std::make_unique<WorkerServiceImpl>(jobs_.get(), registry_.get(), &stopping_);
  return absl::OkStatus();
}

absl::Status CoordinatorServer::Listen(
    net::ServerAddress address,
    const std::shared_ptr<grpc::ServerCredentials>& credentials) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address.ToString(), credentials, &port);
  // gRPC sets SO_REUSEPORT by default: a second coordinator would share the
  // port and clients would alternate between two job stores.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // With BDP probing gRPC widens every new stream's flow-control window to
  // megabytes, which a caller refused at its headers fills before the
  // refusal reaches it (30 refused 7 MiB requests grew the coordinator by
  // 10 to 29 MiB, against 1 without it). A request that is read still flows:
  // gRPC widens its stream's window to the length the message announces.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  // Each handler bounds its own method's requests below this.
  builder.SetMaxReceiveMessageSize(static_cast<int>(kMaxRequestBytes));
  builder.SetMaxSendMessageSize(kMaxResponseBytes);
  net::InstallMalformedRequestStatus(builder);
  builder.RegisterService(job_service_.get());
  builder.RegisterService(worker_service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", address.ToString(),
                     " (in use, or not an address of this host)"));
  }
  address.port = port;
  address_ = address.ToString();
  return absl::OkStatus();
}

void CoordinatorServer::RunLoop(absl::Duration period) {
  absl::Time ticked = MonotonicNow();
  while (!stopping_.WaitForNotificationWithTimeout(period)) {
    // The loop wakes every `period`; waking much later means the whole
    // process stood still (SIGSTOP, a paused VM, a starved CPU), and so did
    // its gRPC threads, which heard no heartbeat meanwhile.
    const absl::Duration asleep = MonotonicNow() - ticked;
    if (asleep > kStalledLoopFactor * period) jobs_->ExcuseStall(asleep - period);
    jobs_->Tick();
    ticked = MonotonicNow();
  }
}

void CoordinatorServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  stopping_.Notify();
  // Streams and TraceJob calls wait for their doorbell or a job change:
  // woken, they see the stop.
  if (registry_ != nullptr) registry_->RingAll();
  if (jobs_ != nullptr) jobs_->WakeWaiters();
  if (loop_.joinable()) loop_.join();
  // Null when Start failed before the server was built.
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
  server_->Wait();
}

CoordinatorServer::~CoordinatorServer() { Shutdown(); }

}  // namespace chimera::coordinator
