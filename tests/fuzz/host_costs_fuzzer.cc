// A host costs file (what `chimera-worker host-costs` writes and `chimera
// run` reads back from its cache): parsing and validation.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "planner/cluster_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view json(reinterpret_cast<const char*>(data), size);
  chimera::v1::HostCosts costs;
  chimera::planner::ParseHostCosts(json, &costs);
  return 0;
}
