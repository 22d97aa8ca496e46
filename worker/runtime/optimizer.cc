#include "worker/runtime/optimizer.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace chimera::worker {
namespace {

// Elements per task of the fused update when LibTorch runs several threads.
constexpr int64_t kFusedGrain = 1 << 16;

// AdamW's per-step scalars: parameter ← parameter·decay + step_size·m̂/…
template <typename T>
struct AdamWCoefficients {
  T decay;
  T beta1;
  T beta2;
  // 1 − β2^t.
  T bias2;
  T eps;
  // −lr / (1 − β1^t).
  T step_size;

  template <typename U>
  AdamWCoefficients<U> Cast() const {
    return {U(decay), U(beta1), U(beta2), U(bias2), U(eps), U(step_size)};
  }
};

absl::Status CheckRange(absl::string_view field, double value, double low,
                        bool low_inclusive, double high) {
  const bool above = low_inclusive ? value >= low : value > low;
  if (above && value < high && std::isfinite(value)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("optimizer ", field, " is ", value, "; it must be in ",
                   low_inclusive ? "[" : "(", low, ", ", high, ")"));
}

// One pass over each parameter's elements instead of the seven of the
// tensor-op form: the update is bound by memory traffic, which this cuts to
// about a third. The formula is the same, element by element.
template <typename T>
void FusedAdamWKernel(T* parameter, const T* gradient, T* m, T* v, int64_t size,
                      const AdamWCoefficients<double>& coefficients) {
  const AdamWCoefficients<T> c = coefficients.template Cast<T>();
  const T one_minus_beta1 = T(1) - c.beta1;
  const T one_minus_beta2 = T(1) - c.beta2;
  at::parallel_for(0, size, kFusedGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const T g = gradient[i];
      const T m_i = m[i] * c.beta1 + g * one_minus_beta1;
      const T v_i = v[i] * c.beta2 + g * g * one_minus_beta2;
      parameter[i] = parameter[i] * c.decay +
                     c.step_size * (m_i / (std::sqrt(v_i / c.bias2) + c.eps));
      m[i] = m_i;
      v[i] = v_i;
    }
  });
}

// Runs the fused update when every tensor is a dense CPU float or double
// tensor of the parameter's type; false (nothing done) otherwise.
bool FusedAdamW(at::Tensor& parameter, const at::Tensor& gradient,
                at::Tensor& m, at::Tensor& v,
                const AdamWCoefficients<double>& c) {
  const auto fits = [&parameter](const at::Tensor& t) {
    return t.device().is_cpu() && t.is_contiguous() &&
           t.scalar_type() == parameter.scalar_type() &&
           t.numel() == parameter.numel();
  };
  if (!fits(parameter) || !fits(gradient) || !fits(m) || !fits(v)) return false;
  switch (parameter.scalar_type()) {
    case at::kFloat:
      FusedAdamWKernel(parameter.data_ptr<float>(), gradient.data_ptr<float>(),
                       m.data_ptr<float>(), v.data_ptr<float>(),
                       parameter.numel(), c);
      return true;
    case at::kDouble:
      FusedAdamWKernel(parameter.data_ptr<double>(),
                       gradient.data_ptr<double>(), m.data_ptr<double>(),
                       v.data_ptr<double>(), parameter.numel(), c);
      return true;
    default:
      return false;
  }
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
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer state has ", state.steps, " steps; it must be >= 0"));
  }
  const auto check = [this](const std::vector<at::Tensor>& moments,
                            absl::string_view what) -> absl::Status {
    if (moments.size() != parameters_.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "optimizer state has ", moments.size(), " ", what,
          "; the optimizer has ", parameters_.size(), " parameters"));
    }
    for (size_t i = 0; i < moments.size(); ++i) {
      if (moments[i].defined() &&
          (moments[i].sizes() != parameters_[i].sizes() ||
           moments[i].scalar_type() != parameters_[i].scalar_type())) {
        return absl::InvalidArgumentError(
            absl::StrCat("optimizer state ", what, "[", i, "] is ",
                         DescribeTensor(moments[i]), "; parameter ", i, " is ",
                         DescribeTensor(parameters_[i])));
      }
    }
    return absl::OkStatus();
  };
  absl::Status status = check(state.first_moments, "first moments");
  if (status.ok()) status = check(state.second_moments, "second moments");
  if (!status.ok()) return status;
  // Copies onto each parameter's device: a checkpoint holds CPU tensors.
  const auto copy = [this](const std::vector<at::Tensor>& moments) {
    std::vector<at::Tensor> copies;
    copies.reserve(moments.size());
    for (size_t i = 0; i < moments.size(); ++i) {
      copies.push_back(moments[i].defined()
                           ? moments[i].to(parameters_[i].options(),
                                           /*non_blocking=*/false,
                                           /*copy=*/true)
                           : at::Tensor());
    }
    return copies;
  };
  first_moments_ = copy(state.first_moments);
  second_moments_ = copy(state.second_moments);
  steps_ = state.steps;
  return absl::OkStatus();
}

void Optimizer::Step() { StepInto(parameters_); }

void Optimizer::StepInto(const std::vector<at::Tensor>& values) {
  at::NoGradGuard no_grad;
  ++steps_;
  if (config_.kind == OptimizerKind::kSgd) {
    SgdStep(values);
  } else {
    AdamWStep(values);
  }
  for (at::Tensor& parameter : parameters_) parameter.mutable_grad().zero_();
}

void Optimizer::SgdStep(const std::vector<at::Tensor>& values) {
  for (size_t i = 0; i < parameters_.size(); ++i) {
    at::Tensor value = values[i];
    at::Tensor gradient = parameters_[i].grad();
    if (config_.weight_decay != 0) {
      gradient = gradient.add(value, config_.weight_decay);
    }
    at::Tensor& buffer = first_moments_[i];
    if (config_.momentum == 0) {
      value.sub_(gradient, config_.lr);
      continue;
    }
    if (!buffer.defined()) {
      buffer = gradient.clone();
    } else {
      buffer.mul_(config_.momentum).add_(gradient);
    }
    value.sub_(buffer, config_.lr);
  }
}

void Optimizer::AdamWStep(const std::vector<at::Tensor>& values) {
  const AdamWCoefficients<double> c{
      .decay = 1 - config_.lr * config_.weight_decay,
      .beta1 = config_.beta1,
      .beta2 = config_.beta2,
      .bias2 = 1 - std::pow(config_.beta2, steps_),
      .eps = config_.eps,
      .step_size = -config_.lr / (1 - std::pow(config_.beta1, steps_))};
  for (size_t i = 0; i < parameters_.size(); ++i) {
    at::Tensor value = values[i];
    const at::Tensor& gradient = parameters_[i].grad();
    at::Tensor& m = first_moments_[i];
    at::Tensor& v = second_moments_[i];
    if (!m.defined()) {
      m = at::zeros_like(value);
      v = at::zeros_like(value);
    }
    if (FusedAdamW(value, gradient, m, v, c)) continue;
    value.mul_(c.decay);
    m.mul_(c.beta1).add_(gradient, 1 - c.beta1);
    v.mul_(c.beta2).addcmul_(gradient, gradient, 1 - c.beta2);
    const at::Tensor denominator = (v / c.bias2).sqrt_().add_(c.eps);
    value.addcdiv_(m, denominator, c.step_size);
  }
}

}  // namespace chimera::worker
