#include "worker/model/loss.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"

namespace chimera::worker {

absl::StatusOr<at::Tensor> LanguageModelLoss(const at::Tensor& logits,
                                             const MicroBatch& batch,
                                             double normaliser) {
  if (!(normaliser > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("loss normaliser is ", normaliser, "; it must be > 0"));
  }
  if (!logits.defined() || logits.dim() != 3 ||
      logits.size(0) != batch.targets.size(0) ||
      logits.size(1) != batch.targets.size(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "logits must be [batch, seq, vocab] matching targets [",
        batch.targets.size(0), ", ", batch.targets.size(1), "]; got ",
        logits.defined() ? c10::str(logits.sizes()) : "undefined"));
  }
  // bfloat16 logits would lose the loss in rounding: compute in float32.
  const at::Tensor wide =
      logits.scalar_type() == at::kBFloat16 ? logits.to(at::kFloat) : logits;
  const int64_t vocab = logits.size(2);
  const at::Tensor per_token =
      at::cross_entropy_loss(wide.reshape({-1, vocab}),
                             batch.targets.to(logits.device()).reshape({-1}),
                             /*weight=*/{}, at::Reduction::None)
          .view(batch.targets.sizes());
  const at::Tensor mask =
      batch.loss_mask.to(logits.device(), wide.scalar_type());
  const at::Tensor per_sample = (per_token * mask).sum(1) / mask.sum(1);
  return (per_sample.sum() / normaliser).to(logits.scalar_type());
}

}  // namespace chimera::worker
