// A cluster file (`chimera plan --cluster`): parsing and validation.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "planner/cluster_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view yaml(reinterpret_cast<const char*>(data), size);
  chimera::v1::Cluster cluster;
  if (chimera::planner::ParseCluster(yaml, &cluster).empty()) {
    chimera::planner::ValidateCluster(cluster);
  }
  return 0;
}
