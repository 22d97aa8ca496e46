#include "net/server_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace chimera::net {

std::string ServerAddress::ToString() const {
  return absl::StrContains(host, ':') ? absl::StrCat("[", host, "]:", port)
                                      : absl::StrCat(host, ":", port);
}

bool ServerAddress::IsLoopback() const {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return false;
  bool loopback = found != nullptr;
  for (const addrinfo* one = found; one != nullptr; one = one->ai_next) {
    if (one->ai_family == AF_INET) {
      const auto* ipv4 = reinterpret_cast<const sockaddr_in*>(one->ai_addr);
      loopback &= (ntohl(ipv4->sin_addr.s_addr) >> 24) == 127;
    } else if (one->ai_family == AF_INET6) {
      const auto* ipv6 = reinterpret_cast<const sockaddr_in6*>(one->ai_addr);
      loopback &= IN6_IS_ADDR_LOOPBACK(&ipv6->sin6_addr) != 0;
    } else {
      loopback = false;
    }
  }
  ::freeaddrinfo(found);
  return loopback;
}

namespace {

constexpr size_t kMaxHostNameLength = 253;
constexpr size_t kMaxLabelLength = 63;

bool IsDnsLabel(absl::string_view label) {
  return !label.empty() && label.size() <= kMaxLabelLength && label.front() != '-' &&
         label.back() != '-' &&
         absl::c_all_of(label, [](char c) { return absl::ascii_isalnum(c) || c == '-'; });
}

}  // namespace

bool IsHostNameOrAddress(absl::string_view host) {
  const std::string text(host);
  in6_addr ipv6;
  if (absl::StrContains(host, ':')) return inet_pton(AF_INET6, text.c_str(), &ipv6) == 1;
  return !host.empty() && host.size() <= kMaxHostNameLength &&
         absl::c_all_of(absl::StrSplit(host, '.'), IsDnsLabel);
}

absl::StatusOr<ServerAddress> ParseServerAddress(absl::string_view text) {
  const size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos || colon + 1 == text.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", text, "' must be HOST:PORT"));
  }
  ServerAddress address;
  absl::string_view host = text.substr(0, colon);
  if (absl::StartsWith(host, "[") && absl::EndsWith(host, "]")) {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", text, "' has no host"));
  }
  address.host = std::string(host);
  if (!absl::SimpleAtoi(text.substr(colon + 1), &address.port) ||
      address.port < 0 || address.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "address '", text, "' has port '", text.substr(colon + 1),
        "'; use 0-65535 (0 = any free port)"));
  }
  return address;
}

absl::StatusOr<ServerAddress> ParseDialAddress(absl::string_view text) {
  if (absl::StrContains(text, "://")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "address '", text, "' is a URL; give HOST:PORT, e.g. 127.0.0.1:50051"));
  }
  ASSIGN_OR_RETURN(ServerAddress address, ParseServerAddress(text));
  if (address.port == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", text,
                     "' has port 0; give the port the server listens on"));
  }
  return address;
}

}  // namespace chimera::net
