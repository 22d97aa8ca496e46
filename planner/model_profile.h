// Model profiles (proto/chimera/v1/profile.proto): loading, validation, and
// what a layer or a whole stage costs at a given micro-batch size.
//
//   chimera::v1::ModelProfile profile;
//   FieldErrors errors = LoadProfileFile("gpt.profile.yaml",
//                                        /*expected_blocks=*/8, &profile);
//   StageProfile stage = ProfileStage(profile, {.first_block = 0,
//                                               .num_blocks = 4},
//                                     /*first=*/true, /*last=*/false,
//                                     /*micro_batch_size=*/8);
#ifndef CHIMERA_PLANNER_MODEL_PROFILE_H_
#define CHIMERA_PLANNER_MODEL_PROFILE_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "chimera/v1/profile.pb.h"
#include "common/field_errors.h"

namespace chimera::planner {

inline constexpr char kModelProfileKind[] = "ModelProfile";

// Reads and validates (ValidateProfile) a profile file.
FieldErrors LoadProfileFile(const std::string& path, int expected_blocks,
                            chimera::v1::ModelProfile* profile);
// Checks the envelope, the layer order (embedding, blocks, head), positive
// sizes and sorted timings. `expected_blocks` > 0 also checks the number of
// blocks against the job's model.
FieldErrors ValidateProfile(const chimera::v1::ModelProfile& profile,
                            int expected_blocks);

struct LayerCost {
  double forward_seconds = 0;
  double backward_seconds = 0;
  // The split backward's halves; negative where the profile has none.
  double backward_input_seconds = -1;
  double backward_weight_seconds = -1;
};

// Interpolates linearly between the profiled micro-batch sizes; outside
// them, scales the nearest point's per-sample time (no speed-up is assumed
// beyond what was measured).
LayerCost CostAt(const chimera::v1::LayerProfile& layer, int micro_batch_size);

// Transformer blocks [first_block, first_block + num_blocks) of one stage.
struct BlockRange {
  int first_block = 0;
  int num_blocks = 0;
};

// What one stage replica costs: the blocks in its range, plus the embedding
// on the first stage and the head on the last.
struct StageProfile {
  double forward_seconds = 0;
  double backward_seconds = 0;
  // The split backward's halves; negative unless every layer's were
  // measured (the simulator then takes half the backward for each).
  double backward_input_seconds = 0;
  double backward_weight_seconds = 0;
  // Per micro-batch of the given size.
  int64_t activation_bytes = 0;
  // The most any one layer's backward holds beyond the activations its
  // forward kept, per micro-batch.
  int64_t backward_extra_bytes = 0;
  // The stage's output (= input of the next stage) per micro-batch.
  int64_t boundary_bytes = 0;
  int64_t parameter_bytes = 0;
  // One optimizer step over the stage's parameters.
  double optimizer_seconds = 0;
};

StageProfile ProfileStage(const chimera::v1::ModelProfile& profile,
                          BlockRange blocks, bool first, bool last,
                          int micro_batch_size);

// Number of "block" layers in the profile.
int NumBlocks(const chimera::v1::ModelProfile& profile);

}  // namespace chimera::planner

#endif  // CHIMERA_PLANNER_MODEL_PROFILE_H_
