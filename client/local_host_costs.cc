#include "client/local_host_costs.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "client/machine_measurement.h"
#include "common/file_reader.h"
#include "common/host_cores.h"
#include "common/status_macros.h"
#include "jobspec/yaml_message.h"
#include "planner/cluster_file.h"

namespace chimera::client {
namespace {

// A few seconds on a 2-core machine; a loaded host takes longer.
constexpr absl::Duration kMeasureTimeout = absl::Minutes(5);

absl::Status ReadHostCosts(const std::string& path,
                           chimera::v1::HostCosts* costs) {
  ASSIGN_OR_RETURN(const std::string json,
                   ReadTextFile(path, jobspec::kMaxYamlFileBytes));
  const FieldErrors errors = planner::ParseHostCosts(json, costs);
  if (!errors.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", errors.ToStatus().message()));
  }
  return absl::OkStatus();
}

}  // namespace

std::string HostCostsCacheName(const std::string& worker_binary_version,
                               const std::string& host, int cores) {
  return absl::StrFormat(
      "host-%016x.json",
      StableHash(absl::StrCat(worker_binary_version, "\n", host, "\n", cores)));
}

absl::StatusOr<Measured<chimera::v1::HostCosts>> MeasureOrReuseHostCosts(
    const MeasurementRequest& request) {
  MachineMeasurement measurement;
  measurement.cache_folder = kHostCostsCacheFolder;
  measurement.name = HostCostsCacheName(FileVersion(request.worker_binary),
                                        HostDescription(), HostCores());
  measurement.arguments = {"host-costs"};
  measurement.timeout = kMeasureTimeout;
  measurement.what = "measuring this host's costs for the planner";
  measurement.alternative =
      " (chimera run --no-profile plans with the coordinator's defaults "
      "instead)";
  Measured<chimera::v1::HostCosts> measured;
  ASSIGN_OR_RETURN(
      measured.file,
      MeasureOrReuse(request, measurement, [&](const std::string& path) {
        return ReadHostCosts(path, &measured.value);
      }));
  return measured;
}

std::string FormatHostCosts(const chimera::v1::HostCosts& costs) {
  return absl::StrFormat(
      "wake-up %.2f ms; a message %.2f ms to post, %.2f ms to receive; "
      "co-running %+.1f%%",
      1e3 * costs.wake_up_seconds(), 1e3 * costs.message_post_seconds(),
      1e3 * costs.message_receive_seconds(), 100 * costs.co_running_slowdown());
}

}  // namespace chimera::client
