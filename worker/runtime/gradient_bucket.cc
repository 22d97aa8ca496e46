#include "worker/runtime/gradient_bucket.h"

#include <utility>

#include "worker/runtime/gradient_sync.h"

namespace chimera::worker {

GradientBucket::GradientBucket(std::vector<at::Tensor> parameters,
                               Lifetime lifetime)
    : parameters_(std::move(parameters)), lifetime_(lifetime) {
  for (const at::Tensor& parameter : parameters_) {
    bytes_ +=
        parameter.numel() * static_cast<int64_t>(parameter.element_size());
  }
  if (lifetime_ == Lifetime::kRun) Hold();
}

const at::Tensor& GradientBucket::Hold() {
  if (!held()) buffer_ = BucketGradients(parameters_);
  return buffer_;
}

void GradientBucket::Reset() {
  if (!held()) return;
  if (lifetime_ == Lifetime::kRun) {
    buffer_.zero_();
    return;
  }
  for (at::Tensor& parameter : parameters_)
    parameter.mutable_grad() = at::Tensor();
  buffer_ = at::Tensor();
}

}  // namespace chimera::worker
