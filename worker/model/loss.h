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
//
// ProjectedLanguageModelLoss is the same loss from the hidden states before
// the head's projection, computed a chunk of tokens at a time so that the
// logits of the whole micro-batch (tokens x vocabulary: on a GPT the
// largest tensor of a step) are never held at once. What a last stage
// trains with (Stage::Loss); LanguageModelLoss is its definition.
#ifndef CHIMERA_WORKER_MODEL_LOSS_H_
#define CHIMERA_WORKER_MODEL_LOSS_H_

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

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

// The tokens of a chunk on `device` when chunk_tokens is 0. On the CPU, as
// many as keep its logits near 8M values (32 MiB in float32), which stay in
// cache. On a GPU at least 4,096: each chunk reads and writes the weight's
// gradient (vocabulary x hidden) once, and a GPU computes some 200 FLOPs in
// the time it moves a byte, so thinner chunks would spend their time on that
// traffic rather than on their products.
int64_t DefaultChunkTokens(int64_t vocab_size, c10::Device device);

// LanguageModelLoss of the logits linear(normed, weight, bias), where
// `normed` is [batch, seq, hidden], `weight` [vocab, hidden] and `bias`
// [vocab] or undefined (no bias). Each chunk
// of `chunk_tokens` tokens (0: DefaultChunkTokens on normed's device) is
// projected, its loss
// taken and, when autograd will ask for them, its gradients too: the
// backward only scales those by the loss's gradient. So it holds one
// chunk's logits (in float32 for bfloat16) and gradients for `normed`,
// `weight` and `bias`, never every token's logits. With chunk_tokens 0 and
// fewer tokens than the hidden size, where the weight's gradient would
// outweigh the logits, it is LanguageModelLoss of the whole logits.
// INVALID_ARGUMENT as LanguageModelLoss, or when the shapes do not chain.
absl::StatusOr<at::Tensor> ProjectedLanguageModelLoss(
    const at::Tensor& normed, const at::Tensor& weight, const at::Tensor& bias,
    const MicroBatch& batch, double normaliser, int64_t chunk_tokens = 0);

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_MODEL_LOSS_H_
