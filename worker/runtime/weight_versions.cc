#include "worker/runtime/weight_versions.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace chimera::worker {

WeightVersions::WeightVersions(std::vector<at::Tensor> parameters)
    : parameters_(std::move(parameters)) {
  std::vector<at::Tensor>& first = versions_[0];
  for (const at::Tensor& parameter : parameters_) {
    // A tensor of its own: detach() alone would share the parameter's
    // record of writes.
    first.push_back(parameter.detach().clone());
    version_bytes_ += static_cast<int64_t>(first.back().nbytes());
  }
  for (size_t i = 0; i < parameters_.size(); ++i) {
    parameters_[i].set_data(first[i]);
  }
}

absl::Status WeightVersions::Use(int64_t version) {
  const auto it = versions_.find(version);
  if (it == versions_.end()) {
    return absl::InternalError(absl::StrCat(
        "weight version ", version, " is not kept: the oldest kept is ",
        versions_.begin()->first, ", the newest ", newest_));
  }
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (!parameters_[i].is_alias_of(it->second[i])) {
      parameters_[i].set_data(it->second[i]);
    }
  }
  return absl::OkStatus();
}

void WeightVersions::Update(Optimizer& optimizer) {
  const std::vector<at::Tensor>& newest = versions_.at(newest_);
  std::vector<at::Tensor> next;
  {
    at::NoGradGuard no_grad;
    if (free_.empty()) {
      for (const at::Tensor& value : newest) next.push_back(value.clone());
    } else {
      next = std::move(free_.back());
      free_.pop_back();
      for (size_t i = 0; i < next.size(); ++i) next[i].copy_(newest[i]);
    }
  }
  optimizer.StepInto(next);
  versions_[++newest_] = std::move(next);
  most_kept_ = std::max(most_kept_, kept());
}

void WeightVersions::UpdateInPlace(Optimizer& optimizer) {
  auto newest = versions_.extract(newest_);
  optimizer.StepInto(newest.mapped());
  newest.key() = ++newest_;
  versions_.insert(std::move(newest));
}

void WeightVersions::DropBelow(int64_t version) {
  while (versions_.begin()->first < std::min(version, newest_)) {
    free_.push_back(std::move(versions_.begin()->second));
    versions_.erase(versions_.begin());
  }
}

}  // namespace chimera::worker
