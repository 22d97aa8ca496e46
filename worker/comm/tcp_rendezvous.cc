#include "worker/comm/tcp_rendezvous.h"

#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
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

absl::Status TcpRendezvous::Set(const std::string& key,
                                const std::string& value) {
  try {
    store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "cannot publish '", key, "' in the rendezvous store: ",
        TorchErrorMessage(e)));
  }
}

absl::StatusOr<std::string> TcpRendezvous::Get(const std::string& key) {
  try {
    const std::vector<uint8_t> value = store_->get(key);
    return std::string(value.begin(), value.end());
  } catch (const std::exception& e) {
    const std::string message = TorchErrorMessage(e);
    const std::string what =
        absl::StrCat("no rank published '", key,
                     "' in the rendezvous store: ", message);
    // c10d reports a wait that ran out as "Socket Timeout" or "timeout".
    if (absl::StrContains(absl::AsciiStrToLower(message), "timeout")) {
      return absl::DeadlineExceededError(what);
    }
    return absl::UnavailableError(what);
  }
}

c10::intrusive_ptr<c10d::Store> TcpRendezvous::store() const { return store_; }

}  // namespace chimera::worker
