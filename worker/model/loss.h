// The training loss of the last stage: cross-entropy of the logits against
// the micro-batch's targets at its loss positions.
//
// Each sample contributes the mean over its loss positions; the micro-batch's
// loss is the SUM of its samples' contributions divided by `normaliser`. With
// normaliser = the number of samples in the whole mini-batch (every
// micro-batch of every pipeline and data-parallel replica), the sum of all
// micro-batch losses, and of their gradients, equals the mean loss of the
// mini-batch computed in one piece.
//
//   ASSIGN_OR_RETURN(at::Tensor loss,
//                    LanguageModelLoss(logits, batch, mini_batch_samples));
//   loss.backward();
#ifndef CHIMERA_WORKER_MODEL_LOSS_H_
#define CHIMERA_WORKER_MODEL_LOSS_H_

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "worker/model/micro_batch.h"

namespace chimera::worker {

// `logits` is [batch, seq, vocab] as the last stage returns it; `batch` the
// micro-batch it was computed from (targets and mask are moved to the logits'
// device), with at least one loss position per sample; normaliser > 0.
// Returns a scalar in the logits' dtype, computed in float32 or wider.
// INVALID_ARGUMENT on a shape mismatch or normaliser <= 0.
absl::StatusOr<at::Tensor> LanguageModelLoss(const at::Tensor& logits,
                                             const MicroBatch& batch,
                                             double normaliser);

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_MODEL_LOSS_H_
