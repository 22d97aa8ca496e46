#include "tests/support/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>

namespace chimera::testing {
namespace {

// Ports below the kernel's ephemeral range are never handed out for a bind
// to port 0 or an outgoing connection, which the tests running alongside
// (Gloo's pairs, gRPC clients) make by the thousand.
constexpr int kLowest = 10000;

int FirstEphemeralPort() {
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int first = 0;
  if (!(range >> first)) first = 32768;
  return first;
}

// Whether nothing is bound to `port` on any address right now.
bool Bindable(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = htons(static_cast<uint16_t>(port));
  const bool bound =
      ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  ::close(fd);
  return bound;
}

}  // namespace

int FreePort() {
  const int end = FirstEphemeralPort();
  if (end <= kLowest) return -1;
  std::mt19937 random(std::random_device{}());
  std::uniform_int_distribution<int> pick(kLowest, end - 1);
  for (int tries = 0; tries < 1000; ++tries) {
    const int port = pick(random);
    if (Bindable(port)) return port;
  }
  return -1;
}

}  // namespace chimera::testing
