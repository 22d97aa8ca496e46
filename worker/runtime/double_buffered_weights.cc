#include "worker/runtime/double_buffered_weights.h"

#include <ATen/ATen.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace chimera::worker {

DoubleBufferedWeights::DoubleBufferedWeights(std::vector<at::Tensor> parameters)
    : parameters_(std::move(parameters)) {
  for (const at::Tensor& parameter : parameters_) {
    // A tensor of its own: detach() alone would share the parameter's
    // record of writes.
    buffers_[0].push_back(parameter.detach().clone());
  }
  for (size_t i = 0; i < parameters_.size(); ++i) {
    parameters_[i].set_data(buffers_[0][i]);
  }
}

absl::Status DoubleBufferedWeights::Use(int64_t version) {
  if (version > newest_ || version < newest_ - 1 || version < 0) {
    return absl::InternalError(
        absl::StrCat("weight version ", version, " is not kept: the newest is ",
                     newest_, ", and the one before it the oldest"));
  }
  const std::vector<at::Tensor>& buffer = Buffer(version);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (!parameters_[i].is_alias_of(buffer[i])) {
      parameters_[i].set_data(buffer[i]);
    }
  }
  return absl::OkStatus();
}

void DoubleBufferedWeights::Update(Optimizer& optimizer) {
  const std::vector<at::Tensor>& newest = Buffer(newest_);
  std::vector<at::Tensor>& next = Buffer(newest_ + 1);
  {
    at::NoGradGuard no_grad;
    if (next.empty()) {
      for (const at::Tensor& value : newest) next.push_back(value.clone());
    } else {
      for (size_t i = 0; i < next.size(); ++i) next[i].copy_(newest[i]);
    }
  }
  optimizer.StepInto(next);
  ++newest_;
}

}  // namespace chimera::worker
