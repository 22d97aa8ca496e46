#include "tests/support/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace chimera::testing {

absl::StatusOr<std::string> HttpGet(const std::string& address, const std::string& path,
                                    absl::Duration timeout) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(absl::StrCat("bad address ", address));
  }
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, address.substr(0, colon).c_str(), &peer.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("not an IPv4 address: ", address));
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  timeval limit{static_cast<time_t>(absl::ToInt64Seconds(timeout)), 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&peer), sizeof(peer)) != 0) {
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to ", address));
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", address, "\r\n\r\n");
  if (::send(fd, request.data(), request.size(), 0) != static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return absl::UnavailableError("sending the request failed");
  }
  std::string response;
  char buffer[4096];
  ssize_t n;
  while ((n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0) response.append(buffer, n);
  ::close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (body == std::string::npos || !absl::StrContains(response.substr(0, 16), " 200")) {
    // The body too: Prometheus' API, for one, says there what was wrong.
    const std::string answer =
        body == std::string::npos ? "" : response.substr(body + 4, 500);
    return absl::UnavailableError(absl::StrCat(
        "GET ", path, " answered: ", response.substr(0, response.find('\r')),
        " ", answer));
  }
  return response.substr(body + 4);
}

}  // namespace chimera::testing
