// A model profile file (`chimera plan --profile`): parsing, validation and,
// for a valid profile, what its layers and stages cost at several
// micro-batch sizes, as the planner asks.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "jobspec/yaml_message.h"
#include "planner/model_profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view yaml(reinterpret_cast<const char*>(data), size);
  chimera::v1::ModelProfile profile;
  if (!chimera::jobspec::ParseYamlMessage(yaml, &profile).empty()) return 0;
  if (!chimera::planner::ValidateProfile(profile, 0).empty()) return 0;
  const int blocks = chimera::planner::NumBlocks(profile);
  for (int micro_batch_size : {1, 3, 64}) {
    for (const chimera::v1::LayerProfile& layer : profile.layers()) {
      chimera::planner::CostAt(layer, micro_batch_size);
    }
    chimera::planner::ProfileStage(profile, {.first_block = 0, .num_blocks = blocks},
                                   /*first=*/true, /*last=*/true, micro_batch_size);
  }
  return 0;
}
