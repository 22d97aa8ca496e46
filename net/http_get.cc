#include "net/http_get.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "net/server_address.h"

namespace chimera::net {
namespace {

// Milliseconds left until `deadline`, for poll(); 0 once it has passed.
int MillisecondsLeft(absl::Time deadline) {
  return static_cast<int>(
      std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now())));
}

// Waits until `fd` is ready for `events`; false when the deadline passes.
bool WaitFor(int fd, short events, absl::Time deadline) {
  pollfd watched{fd, events, 0};
  while (true) {
    const int ready = ::poll(&watched, 1, MillisecondsLeft(deadline));
    if (ready > 0) return true;
    if (ready == 0 || errno != EINTR) return false;
  }
}

// A non-blocking socket connected to one of `address`'s resolved addresses.
absl::StatusOr<int> Connect(const ServerAddress& address, absl::Time deadline) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(address.port);
  if (const int error =
          ::getaddrinfo(address.host.c_str(), port.c_str(), &hints, &found);
      error != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", address.host,
                                               ": ", ::gai_strerror(error)));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(found,
                                                             &::freeaddrinfo);
  for (const addrinfo* candidate = found; candidate != nullptr;
       candidate = candidate->ai_next) {
    const int fd =
        ::socket(candidate->ai_family,
                 candidate->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                 candidate->ai_protocol);
    if (fd < 0) continue;
    int error = 0;
    socklen_t length = sizeof(error);
    if ((::connect(fd, candidate->ai_addr, candidate->ai_addrlen) == 0 ||
         (errno == EINPROGRESS && WaitFor(fd, POLLOUT, deadline) &&
          ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 &&
          error == 0))) {
      return fd;
    }
    ::close(fd);
  }
  return absl::UnavailableError(
      absl::StrCat("cannot connect to ", address.ToString()));
}

// Sends all of `data`; false on an error or at the deadline.
bool SendAll(int fd, absl::string_view data, absl::Time deadline) {
  while (!data.empty()) {
    if (!WaitFor(fd, POLLOUT, deadline)) return false;
    const ssize_t sent = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (sent < 0 && errno != EAGAIN && errno != EINTR) return false;
    if (sent > 0) data.remove_prefix(static_cast<size_t>(sent));
  }
  return true;
}

// Everything the server sends until it closes.
absl::StatusOr<std::string> ReceiveAll(int fd, absl::Time deadline,
                                       size_t max_bytes) {
  std::string response;
  char buffer[4096];
  while (true) {
    if (!WaitFor(fd, POLLIN, deadline)) {
      return absl::UnavailableError("no whole answer in time");
    }
    const ssize_t got = ::recv(fd, buffer, sizeof(buffer), 0);
    if (got == 0) return response;
    if (got < 0 && errno != EAGAIN && errno != EINTR) {
      return absl::UnavailableError("the connection failed while reading");
    }
    if (got > 0) response.append(buffer, static_cast<size_t>(got));
    if (response.size() > max_bytes) {
      return absl::UnavailableError(
          absl::StrCat("the answer is larger than ", max_bytes, " bytes"));
    }
  }
}

}  // namespace

absl::StatusOr<std::string> HttpGet(const std::string& address,
                                    const std::string& path,
                                    absl::Duration timeout, size_t max_bytes) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<ServerAddress> parsed = ParseDialAddress(address);
  if (!parsed.ok()) return parsed.status();
  absl::StatusOr<int> fd = Connect(*parsed, deadline);
  if (!fd.ok()) return fd.status();
  absl::Cleanup close_fd = [fd = *fd] { ::close(fd); };
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", address, "\r\n\r\n");
  if (!SendAll(*fd, request, deadline)) {
    return absl::UnavailableError(
        absl::StrCat("sending GET ", path, " to ", address, " failed"));
  }
  absl::StatusOr<std::string> response = ReceiveAll(*fd, deadline, max_bytes);
  if (!response.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "GET ", path, " from ", address, ": ", response.status().message()));
  }
  const size_t body = response->find("\r\n\r\n");
  if (body == std::string::npos ||
      !absl::StrContains(response->substr(0, 16), " 200")) {
    // The body too: Prometheus' API, for one, says there what was wrong.
    const std::string answer =
        body == std::string::npos ? "" : response->substr(body + 4, 500);
    return absl::UnavailableError(absl::StrCat(
        "GET ", path, " from ", address,
        " answered: ", response->substr(0, response->find('\r')), " ", answer));
  }
  return response->substr(body + 4);
}

}  // namespace chimera::net
