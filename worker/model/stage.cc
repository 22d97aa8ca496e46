#include "worker/model/stage.h"

#include "absl/strings/str_cat.h"

namespace chimera::worker {

Stage::Stage(LayerRange layers, int64_t num_layers)
    : layers_(layers), num_layers_(num_layers) {}

absl::StatusOr<at::Tensor> Stage::Loss(const at::Tensor& input,
                                       const MicroBatch& batch,
                                       double normaliser) {
  if (!is_last()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the loss is the last stage's; this stage ends at block ",
                     layers_.end, " of ", num_layers_));
  }
  return LastStageLoss(input, batch, normaliser);
}

}  // namespace chimera::worker
