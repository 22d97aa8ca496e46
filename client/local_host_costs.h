// What a CPU worker process pays on this host beyond its compute (the wake-up
// after a wait, posting and receiving a message, computing beside other
// workers), as `chimera run` plans local cpu jobs with it: the coordinator's
// defaults were measured on one VM and move predictions by tens of percent
// on another (docs/planner.md), so the run measures this host first with
// `chimera-worker host-costs` and hands the figures to its coordinator. They
// are cached, keyed by the host, its cores and the worker build, so that
// only the first run on a machine pays the few seconds.
//
//   ASSIGN_OR_RETURN(Measured<chimera::v1::HostCosts> local,
//                    MeasureOrReuseHostCosts({.worker_binary = binary, ...}));
//   std::cout << FormatHostCosts(local.value);
#ifndef CHIMERA_CLIENT_LOCAL_HOST_COSTS_H_
#define CHIMERA_CLIENT_LOCAL_HOST_COSTS_H_

#include <string>

#include "absl/status/statusor.h"
#include "chimera/v1/host_costs.pb.h"
#include "client/machine_measurement.h"

namespace chimera::client {

// The cache's folder of host costs (MeasurementCacheDirectory).
inline constexpr char kHostCostsCacheFolder[] = "hosts";

// The cache file name: "host-<16 hex digits>.json", the digits a hash of
// the worker binary's version (FileVersion), the host (HostDescription) and
// its cores.
std::string HostCostsCacheName(const std::string& worker_binary_version,
                               const std::string& host, int cores);

// This host's costs from the cache, or measured now by the worker binary
// (and cached). INTERNAL naming the log file when the measurement fails.
absl::StatusOr<Measured<chimera::v1::HostCosts>> MeasureOrReuseHostCosts(
    const MeasurementRequest& request);

// "wake-up 0.19 ms; a message 0.07 ms to post, 0.86 ms to receive;
// co-running +2.1%".
std::string FormatHostCosts(const chimera::v1::HostCosts& costs);

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_LOCAL_HOST_COSTS_H_
