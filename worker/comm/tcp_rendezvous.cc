#include "worker/comm/tcp_rendezvous.h"

#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/comm/torch_error.h"

namespace chimera::worker {
namespace {

absl::StatusOr<c10::intrusive_ptr<c10d::TCPStore>> OpenStore(
    const std::string& host, int port, const c10d::TCPStoreOptions& options,
    absl::string_view role) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rendezvous port is ", port, "; it must be in [0, 65535]"));
  }
  try {
    return c10::make_intrusive<c10d::TCPStore>(host, options);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot ", role, " the rendezvous store at ", host, ":",
                     port, ": ", TorchErrorMessage(e)));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpRendezvous>> TcpRendezvous::Host(
    const std::string& host, int port, int world_size, absl::Duration timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port);
  options.isServer = true;
  options.numWorkers = world_size;
  options.waitWorkers = false;
  options.timeout = absl::ToChronoMilliseconds(timeout);
  auto store = OpenStore(host, port, options, "serve");
  if (!store.ok()) return store.status();
  const int bound_port = (*store)->getPort();
  return std::unique_ptr<TcpRendezvous>(
      new TcpRendezvous(*std::move(store), bound_port));
}

absl::StatusOr<std::unique_ptr<TcpRendezvous>> TcpRendezvous::Join(
    const std::string& host, int port, absl::Duration timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port);
  options.isServer = false;
  options.waitWorkers = false;
  options.timeout = absl::ToChronoMilliseconds(timeout);
  auto store = OpenStore(host, port, options, "join");
  if (!store.ok()) return store.status();
  return std::unique_ptr<TcpRendezvous>(
      new TcpRendezvous(*std::move(store), port));
}

TcpRendezvous::TcpRendezvous(c10::intrusive_ptr<c10d::Store> store, int port)
    : store_(std::move(store)), port_(port) {}

TcpRendezvous::~TcpRendezvous() = default;

c10::intrusive_ptr<c10d::Store> TcpRendezvous::store() const { return store_; }

}  // namespace chimera::worker
