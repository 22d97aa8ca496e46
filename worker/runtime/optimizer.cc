#include "worker/runtime/optimizer.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace chimera::worker {
namespace {

absl::Status CheckRange(absl::string_view field, double value, double low,
                        bool low_inclusive, double high) {
  const bool above = low_inclusive ? value >= low : value > low;
  if (above && value < high && std::isfinite(value)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("optimizer ", field, " is ", value, "; it must be in ",
                   low_inclusive ? "[" : "(", low, ", ", high, ")"));
}

}  // namespace

std::string DescribeTensor(const at::Tensor& tensor) {
  return absl::StrCat(c10::toString(tensor.scalar_type()), "[",
                      absl::StrJoin(tensor.sizes(), ", "), "]");
}

absl::StatusOr<OptimizerKind> ParseOptimizerKind(absl::string_view name) {
  if (name == "sgd") return OptimizerKind::kSgd;
  if (name == "adamw") return OptimizerKind::kAdamW;
  return absl::InvalidArgumentError(
      absl::StrCat("optimizer '", name, "' is not one of sgd, adamw"));
}

absl::Status ValidateOptimizerConfig(const OptimizerConfig& config) {
  constexpr double kInfinity = HUGE_VAL;
  absl::Status status = CheckRange("lr", config.lr, 0, false, kInfinity);
  if (status.ok()) {
    status =
        CheckRange("weight_decay", config.weight_decay, 0, true, kInfinity);
  }
  if (status.ok()) {
    status = CheckRange("momentum", config.momentum, 0, true, 1);
  }
  if (status.ok()) status = CheckRange("beta1", config.beta1, 0, true, 1);
  if (status.ok()) status = CheckRange("beta2", config.beta2, 0, true, 1);
  if (status.ok()) status = CheckRange("eps", config.eps, 0, false, kInfinity);
  return status;
}

Optimizer::Optimizer(const OptimizerConfig& config,
                     std::vector<at::Tensor> parameters)
    : config_(config),
      parameters_(std::move(parameters)),
      first_moments_(parameters_.size()),
      second_moments_(parameters_.size()) {}

OptimizerState Optimizer::state() const {
  return {steps_, first_moments_, second_moments_};
}

absl::Status Optimizer::Restore(const OptimizerState& state) {
  if (state.steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer state has ", state.steps, " steps; it must be >= 0"));
  }
  const auto check = [this](const std::vector<at::Tensor>& moments,
                            absl::string_view what) -> absl::Status {
    if (moments.size() != parameters_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer state has ", moments.size(), " ", what,
                       "; the optimizer has ", parameters_.size(), " parameters"));
    }
    for (size_t i = 0; i < moments.size(); ++i) {
      if (moments[i].defined() &&
          (moments[i].sizes() != parameters_[i].sizes() ||
           moments[i].scalar_type() != parameters_[i].scalar_type())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "optimizer state ", what, "[", i, "] is ", DescribeTensor(moments[i]),
            "; parameter ", i, " is ", DescribeTensor(parameters_[i])));
      }
    }
    return absl::OkStatus();
  };
  absl::Status status = check(state.first_moments, "first moments");
  if (status.ok()) status = check(state.second_moments, "second moments");
  if (!status.ok()) return status;
  const auto copy = [](const std::vector<at::Tensor>& moments) {
    std::vector<at::Tensor> copies;
    copies.reserve(moments.size());
    for (const at::Tensor& moment : moments) {
      copies.push_back(moment.defined() ? moment.clone() : at::Tensor());
    }
    return copies;
  };
  first_moments_ = copy(state.first_moments);
  second_moments_ = copy(state.second_moments);
  steps_ = state.steps;
  return absl::OkStatus();
}

void Optimizer::Step() {
  at::NoGradGuard no_grad;
  ++steps_;
  if (config_.kind == OptimizerKind::kSgd) {
    SgdStep();
  } else {
    AdamWStep();
  }
  for (at::Tensor& parameter : parameters_) parameter.mutable_grad().zero_();
}

void Optimizer::SgdStep() {
  for (size_t i = 0; i < parameters_.size(); ++i) {
    at::Tensor& parameter = parameters_[i];
    at::Tensor gradient = parameter.grad();
    if (config_.weight_decay != 0) {
      gradient = gradient.add(parameter, config_.weight_decay);
    }
    at::Tensor& buffer = first_moments_[i];
    if (config_.momentum == 0) {
      parameter.sub_(gradient, config_.lr);
      continue;
    }
    if (!buffer.defined()) {
      buffer = gradient.clone();
    } else {
      buffer.mul_(config_.momentum).add_(gradient);
    }
    parameter.sub_(buffer, config_.lr);
  }
}

void Optimizer::AdamWStep() {
  const double bias1 = 1 - std::pow(config_.beta1, steps_);
  const double bias2 = 1 - std::pow(config_.beta2, steps_);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    at::Tensor& parameter = parameters_[i];
    const at::Tensor& gradient = parameter.grad();
    at::Tensor& m = first_moments_[i];
    at::Tensor& v = second_moments_[i];
    if (!m.defined()) {
      m = at::zeros_like(parameter);
      v = at::zeros_like(parameter);
    }
    parameter.mul_(1 - config_.lr * config_.weight_decay);
    m.mul_(config_.beta1).add_(gradient, 1 - config_.beta1);
    v.mul_(config_.beta2).addcmul_(gradient, gradient, 1 - config_.beta2);
    const at::Tensor denominator = (v / bias2).sqrt_().add_(config_.eps);
    parameter.addcdiv_(m, denominator, -config_.lr / bias1);
  }
}

}  // namespace chimera::worker
