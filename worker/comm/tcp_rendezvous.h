// The key-value store through which the ranks of a job find each other
// (LibTorch's c10d::TCPStore). One rank hosts it; the others join it at the
// address the coordinator hands out. Communicators build their process groups
// on it (gloo_communicator.h, nccl_communicator.h).
//
//   // Rank 0:
//   ASSIGN_OR_RETURN(auto rendezvous,
//                    TcpRendezvous::Host("0.0.0.0", /*port=*/0, world_size));
//   ReportStorePort(rendezvous->port());  // an ephemeral port was chosen
//   // Every other rank:
//   ASSIGN_OR_RETURN(auto rendezvous, TcpRendezvous::Join(host, port));
#ifndef CHIMERA_WORKER_COMM_TCP_RENDEZVOUS_H_
#define CHIMERA_WORKER_COMM_TCP_RENDEZVOUS_H_

#include <c10/util/intrusive_ptr.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/comm/communicator.h"

namespace c10d {
class Store;
}  // namespace c10d

namespace chimera::worker {

class TcpRendezvous {
 public:
  // Serves the store on host:port; port 0 picks a free ephemeral port (see
  // port()). Returns at once, without waiting for the other ranks.
  // UNAVAILABLE when the port cannot be bound.
  static absl::StatusOr<std::unique_ptr<TcpRendezvous>> Host(
      const std::string& host, int port, int world_size,
      absl::Duration timeout = kDefaultConnectTimeout);

  // Connects to the store served at host:port, retrying until `timeout`.
  // UNAVAILABLE naming the address when it cannot connect.
  static absl::StatusOr<std::unique_ptr<TcpRendezvous>> Join(
      const std::string& host, int port,
      absl::Duration timeout = kDefaultConnectTimeout);

  ~TcpRendezvous();
  TcpRendezvous(const TcpRendezvous&) = delete;
  TcpRendezvous& operator=(const TcpRendezvous&) = delete;

  // The port the store is served on.
  int port() const { return port_; }

  // Publishes `value` under `key` for every rank. UNAVAILABLE when the store
  // cannot be reached.
  absl::Status Set(const std::string& key, const std::string& value);
  // The value under `key`, waiting until some rank sets it, at most the
  // store's timeout. DEADLINE_EXCEEDED when none does, UNAVAILABLE when the
  // store cannot be reached.
  absl::StatusOr<std::string> Get(const std::string& key);

  // The store, for communicators to build process groups on. It outlives the
  // rendezvous as long as a communicator holds it.
  c10::intrusive_ptr<c10d::Store> store() const;

 private:
  TcpRendezvous(c10::intrusive_ptr<c10d::Store> store, int port);

  c10::intrusive_ptr<c10d::Store> store_;
  int port_;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_COMM_TCP_RENDEZVOUS_H_
