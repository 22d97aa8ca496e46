// The /metrics endpoint as a service's command line asks for it: the
// coordinator and the worker daemon take the same two flags, with the same
// meaning and the same guard against serving the page beyond loopback by
// accident.
//
//   MetricsFlags metrics;
//   AddMetricsFlags(&app, "the coordinator's", &metrics);
//   ...
//   ASSIGN_OR_RETURN(std::unique_ptr<MetricsServer> server,
//                    StartMetrics(metrics));  // null: no endpoint asked for
#ifndef CHIMERA_NET_METRICS_FLAGS_H_
#define CHIMERA_NET_METRICS_FLAGS_H_

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "net/metrics_server.h"

namespace chimera::net {

struct MetricsFlags {
  // HOST:PORT of the endpoint (--metrics-listen); empty: none.
  std::string listen;
  // Whether it may listen beyond loopback (--metrics-public).
  bool public_reach = false;
};

// Registers --metrics-listen and --metrics-public on `app`, `whose` naming
// the endpoint's owner in their help ("the daemon's").
void AddMetricsFlags(CLI::App* app, absl::string_view whose,
                     MetricsFlags* flags);

// The endpoint `flags` ask for; null when they ask for none. The errors of
// MetricsServer::Start.
absl::StatusOr<std::unique_ptr<MetricsServer>> StartMetrics(
    const MetricsFlags& flags);

}  // namespace chimera::net

#endif  // CHIMERA_NET_METRICS_FLAGS_H_
