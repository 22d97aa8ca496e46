// CoordinatorClient: the CLI's connection to a coordinator's JobService,
// with the address, token and TLS settings users give by flag or
// environment, and a deadline on every call.
//
//   CoordinatorClient client(options);
//   ASSIGN_OR_RETURN(chimera::v1::Job job, client.Submit(manifest));
#ifndef CHIMERA_CLIENT_COORDINATOR_CLIENT_H_
#define CHIMERA_CLIENT_COORDINATOR_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chimera/v1/service.grpc.pb.h"
#include "net/tls_credentials.h"

namespace chimera::client {

inline constexpr char kDefaultAddress[] = "127.0.0.1:50051";
inline constexpr absl::Duration kDefaultCallTimeout = absl::Seconds(10);

struct ConnectionOptions {
  // HOST:PORT; empty: $CHIMERA_ADDRESS, else kDefaultAddress.
  std::string address;
  // Bearer token; empty: $CHIMERA_TOKEN, else none.
  std::string token;
  // TLS: the PEM CA that verifies the coordinator and, for a coordinator
  // that requires client certificates, this client's certificate and key.
  // Empty: $CHIMERA_TLS_CA, $CHIMERA_TLS_CERT, $CHIMERA_TLS_KEY; all unset:
  // plaintext.
  net::ClientTlsFiles tls;
  absl::Duration call_timeout = kDefaultCallTimeout;
};

class CoordinatorClient {
 public:
  // Fills what `options` leaves empty from the environment. INVALID_ARGUMENT
  // for an unreadable TLS file or a certificate without its key.
  static absl::StatusOr<std::unique_ptr<CoordinatorClient>> Connect(
      ConnectionOptions options);

  const std::string& address() const { return options_.address; }

  // `profile`, where not empty, is what the coordinator plans the job from
  // (a measured profile of its model).
  absl::StatusOr<chimera::v1::Job> Submit(
      const chimera::v1::TrainJob& manifest,
      const chimera::v1::ModelProfile& profile = {});
  absl::StatusOr<chimera::v1::Job> Get(const std::string& id);
  // Every job in `state`, oldest first, fetched page by page.
  absl::StatusOr<std::vector<chimera::v1::Job>> List(
      chimera::v1::JobState state);
  absl::StatusOr<chimera::v1::Job> Stop(const std::string& id);
  absl::StatusOr<std::vector<chimera::v1::WorkerInfo>> Workers();
  // The standard grpc.health.v1 check of the whole server: OK when the
  // coordinator answers SERVING, UNAVAILABLE with the status it gave or why
  // it could not be asked.
  absl::Status CheckHealth();
  // One step's measured timeline of every rank (TraceJob): `step`, or with
  // none the next step; waits up to `wait` for the ranks to record it.
  absl::StatusOr<chimera::v1::JobTrace> Trace(const std::string& id,
                                              std::optional<int> step,
                                              absl::Duration wait);
  // Calls `on_event` for each event until the job ends (or, with
  // `follow` false, until the first status event); no deadline while
  // following, since training takes as long as it takes.
  absl::Status Watch(
      const std::string& id, bool follow,
      const std::function<void(const chimera::v1::JobEvent&)>& on_event);

 private:
  explicit CoordinatorClient(
      ConnectionOptions options,
      std::shared_ptr<grpc::ChannelCredentials> credentials);
  std::unique_ptr<grpc::ClientContext> Context(bool with_deadline = true) const;

  ConnectionOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<chimera::v1::JobService::Stub> stub_;
};

// "NOT_FOUND: no job 'x'" style text of a failed call.
std::string DescribeError(const absl::Status& status);

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_COORDINATOR_CLIENT_H_
