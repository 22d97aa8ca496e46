// HttpGet: a minimal HTTP/1.0 GET with one deadline for the whole exchange,
// for `chimera health` against a daemon's /healthz and for the tests that
// read the real /metrics pages and Prometheus' API.
//
//   ASSIGN_OR_RETURN(std::string body, HttpGet("127.0.0.1:9400", "/healthz"));
#ifndef CHIMERA_NET_HTTP_GET_H_
#define CHIMERA_NET_HTTP_GET_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace chimera::net {

// The body of GET http://`address``path` (address "HOST:PORT", HOST a name
// or an address). INVALID_ARGUMENT for a malformed address; UNAVAILABLE when
// nothing answers, for a non-200 answer (with the start of its body) or no
// whole answer within `timeout`, and for an answer larger than
// `max_bytes`.
absl::StatusOr<std::string> HttpGet(const std::string& address,
                                    const std::string& path,
                                    absl::Duration timeout = absl::Seconds(10),
                                    size_t max_bytes = 64 << 20);

}  // namespace chimera::net

#endif  // CHIMERA_NET_HTTP_GET_H_
