// Listen addresses: parsing "HOST:PORT" and telling loopback from the rest,
// so a coordinator without authentication never listens beyond this machine.
#ifndef CHIMERA_NET_SERVER_ADDRESS_H_
#define CHIMERA_NET_SERVER_ADDRESS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace chimera::net {

struct ServerAddress {
  std::string host;  // Without brackets for IPv6.
  int port = 0;      // 0 = the OS picks a free port.

  // "host:port", with brackets around an IPv6 host.
  std::string ToString() const;
  // Whether every address the host resolves to is a loopback one (127/8,
  // ::1), by what it resolves to rather than how it is spelled: a name such
  // as "127.attacker.example" is whatever its DNS says. A host that does not
  // resolve is not loopback.
  bool IsLoopback() const;
};

// Whether `host` is what a peer can dial as a host: an IPv4 address, an IPv6
// address without brackets, or a DNS name (RFC 1123: labels of letters,
// digits and '-', 1 to 63 characters each, neither starting nor ending with
// '-', joined by dots; at most 253 characters). No port, no spaces.
bool IsHostNameOrAddress(absl::string_view host);

// Parses "127.0.0.1:50051", "localhost:0", "[::1]:7000", "0.0.0.0:50051".
absl::StatusOr<ServerAddress> ParseServerAddress(absl::string_view text);

// Parses an address to dial: HOST:PORT as above, with a real port (1-65535)
// and no URL scheme ("http://host:port" would go to the resolver as a host
// name and fail there, far from the mistake).
absl::StatusOr<ServerAddress> ParseDialAddress(absl::string_view text);

}  // namespace chimera::net

#endif  // CHIMERA_NET_SERVER_ADDRESS_H_
