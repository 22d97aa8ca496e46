// Cluster files: YAML describing the devices and links the planner plans
// for (see proto/chimera/v1/cluster.proto), and host costs files, the CPU
// terms of a device measured on one host; parsed strictly and validated,
// every problem reported with its field path.
//
//   chimera::v1::Cluster cluster;
//   FieldErrors errors = LoadClusterFile("examples/clusters/v100-4x8.yaml",
//                                        &cluster);
#ifndef CHIMERA_PLANNER_CLUSTER_FILE_H_
#define CHIMERA_PLANNER_CLUSTER_FILE_H_

#include <string>

#include "absl/strings/string_view.h"
#include "chimera/v1/cluster.pb.h"
#include "chimera/v1/host_costs.pb.h"
#include "common/field_errors.h"

namespace chimera::planner {

inline constexpr char kClusterKind[] = "Cluster";

FieldErrors LoadClusterFile(const std::string& path,
                            chimera::v1::Cluster* cluster);
FieldErrors ParseCluster(absl::string_view yaml, chimera::v1::Cluster* cluster);
FieldErrors ValidateCluster(const chimera::v1::Cluster& cluster);

// A host costs file (proto/chimera/v1/host_costs.proto, as
// `chimera-worker host-costs` writes it), parsed strictly and validated:
// every field finite and >= 0.
FieldErrors ParseHostCosts(absl::string_view json,
                           chimera::v1::HostCosts* costs);

}  // namespace chimera::planner

#endif  // CHIMERA_PLANNER_CLUSTER_FILE_H_
