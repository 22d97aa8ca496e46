// A minimal HTTP/1.0 GET for tests that read the real /metrics endpoints and
// the real Prometheus' API on loopback. Bounded by a deadline.
#ifndef CHIMERA_TESTS_SUPPORT_HTTP_GET_H_
#define CHIMERA_TESTS_SUPPORT_HTTP_GET_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace chimera::testing {

// The body of GET http://`address``path` (address "HOST:PORT"); an error for
// a non-200 answer (with the start of its body) or no answer within `timeout`.
absl::StatusOr<std::string> HttpGet(const std::string& address, const std::string& path,
                                    absl::Duration timeout = absl::Seconds(10));

}  // namespace chimera::testing

#endif  // CHIMERA_TESTS_SUPPORT_HTTP_GET_H_
