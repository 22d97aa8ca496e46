#include "planner/cluster_file.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "jobspec/yaml_message.h"

namespace chimera::planner {
namespace {

void CheckPositive(FieldErrors* errors, absl::string_view path, double value) {
  if (!(value > 0) || !std::isfinite(value)) {
    errors->Add(path, absl::StrCat(value, " must be > 0"));
  }
}

void CheckNonNegative(FieldErrors* errors, const std::string& path,
                      double value) {
  if (!(value >= 0) || !std::isfinite(value)) {
    errors->Add(path, absl::StrCat(value, " must be >= 0"));
  }
}

void CheckLink(FieldErrors* errors, const std::string& path,
               const chimera::v1::LinkSpec& link) {
  CheckNonNegative(errors, path + ".latencySeconds", link.latency_seconds());
  CheckNonNegative(errors, path + ".collectiveLatencySeconds",
                   link.collective_latency_seconds());
  CheckPositive(errors, path + ".bandwidthBytesPerSecond",
                link.bandwidth_bytes_per_second());
}

// The CPU terms a cluster's device and a host costs file share.
template <typename Costs>
void CheckHostCosts(const Costs& costs, const std::string& prefix,
                    FieldErrors* errors) {
  CheckNonNegative(errors, prefix + "coRunningSlowdown",
                   costs.co_running_slowdown());
  CheckNonNegative(errors, prefix + "wakeUpSeconds", costs.wake_up_seconds());
  CheckNonNegative(errors, prefix + "messagePostSeconds",
                   costs.message_post_seconds());
  CheckNonNegative(errors, prefix + "messageReceiveSeconds",
                   costs.message_receive_seconds());
}

FieldErrors ValidateParsed(FieldErrors parse_errors,
                           const chimera::v1::Cluster& cluster) {
  if (!parse_errors.empty()) return parse_errors;
  return ValidateCluster(cluster);
}

}  // namespace

FieldErrors ValidateCluster(const chimera::v1::Cluster& cluster) {
  FieldErrors errors;
  jobspec::CheckApiVersionAndKind(cluster.api_version(), cluster.kind(), kClusterKind,
                         &errors);
  const auto& spec = cluster.spec();
  CheckPositive(&errors, "spec.nodes", spec.nodes());
  CheckPositive(&errors, "spec.devicesPerNode", spec.devices_per_node());
  CheckPositive(&errors, "spec.device.memoryBytes",
                static_cast<double>(spec.device().memory_bytes()));
  CheckPositive(&errors, "spec.device.peakFlops", spec.device().peak_flops());
  if (spec.device().cores_per_node() < 0) {
    errors.Add("spec.device.coresPerNode",
               absl::StrCat(spec.device().cores_per_node(), " must be >= 0"));
  }
  CheckHostCosts(spec.device(), "spec.device.", &errors);
  CheckLink(&errors, "spec.links.intraNode", spec.links().intra_node());
  if (spec.nodes() > 1 || spec.links().has_inter_node()) {
    CheckLink(&errors, "spec.links.interNode", spec.links().inter_node());
  }
  return errors;
}

FieldErrors LoadClusterFile(const std::string& path,
                            chimera::v1::Cluster* cluster) {
  return ValidateParsed(jobspec::LoadYamlMessageFile(path, cluster), *cluster);
}

FieldErrors ParseCluster(absl::string_view yaml, chimera::v1::Cluster* cluster) {
  return ValidateParsed(jobspec::ParseYamlMessage(yaml, cluster), *cluster);
}

FieldErrors ParseHostCosts(absl::string_view json,
                           chimera::v1::HostCosts* costs) {
  FieldErrors errors = jobspec::ParseYamlMessage(json, costs);
  if (errors.empty()) CheckHostCosts(*costs, "", &errors);
  return errors;
}

}  // namespace chimera::planner
