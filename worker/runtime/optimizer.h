// The optimizers a job can name, written out on the parameter tensors
// in-place so every worker and the single-process reference apply exactly the
// same arithmetic (and nothing from torch/optim needs compiling).
//
// SGD with momentum (PyTorch's rule, dampening 0, L2 weight decay folded into
// the gradient):
//   g ← grad + weight_decay·θ;  b ← g on the first step, else momentum·b + g;
//   θ ← θ − lr·b
// AdamW (Loshchilov & Hutter; decay decoupled from the gradient), step t ≥ 1:
//   θ ← θ·(1 − lr·weight_decay);  m ← β1·m + (1 − β1)·g;  v ← β2·v + (1 −
//   β2)·g² θ ← θ − lr·(m / (1 − β1ᵗ)) / (sqrt(v / (1 − β2ᵗ)) + eps)
// After the update every gradient is set to zero, ready for the next
// iteration's accumulation.
//
//   OptimizerConfig config{.kind = OptimizerKind::kAdamW, .lr = 1e-3};
//   RETURN_IF_ERROR(ValidateOptimizerConfig(config));
//   Optimizer optimizer(config, stage->parameters());
//   ... backward passes accumulate into each parameter's grad() ...
//   optimizer.Step();
#ifndef CHIMERA_WORKER_RUNTIME_OPTIMIZER_H_
#define CHIMERA_WORKER_RUNTIME_OPTIMIZER_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace chimera::worker {

enum class OptimizerKind { kSgd, kAdamW };

// "sgd" or "adamw" (the job file's spec.training.optimizer.name).
absl::StatusOr<OptimizerKind> ParseOptimizerKind(absl::string_view name);

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kSgd;
  double lr = 1e-3;
  // SGD only, in [0, 1).
  double momentum = 0.0;
  // >= 0; L2 for SGD, decoupled for AdamW.
  double weight_decay = 0.0;
  // AdamW only: β1, β2 in [0, 1), eps > 0.
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
};

// INVALID_ARGUMENT naming the field, its value and the allowed range.
absl::Status ValidateOptimizerConfig(const OptimizerConfig& config);

// "Float[4, 8]": a tensor's type and shape, for error messages.
std::string DescribeTensor(const at::Tensor& tensor);

// What an optimizer carries from one step to the next besides the
// parameters; with them, all a checkpoint needs to resume bit-exactly.
struct OptimizerState {
  // Updates applied so far (AdamW's bias correction depends on it).
  int64_t steps = 0;
  // Per parameter, in the optimizer's order: SGD's momentum buffers in
  // first_moments; AdamW's first and second moments. An entry is undefined
  // while the optimizer has not created it (before the first step, or SGD
  // without momentum), and second_moments are all undefined for SGD.
  std::vector<at::Tensor> first_moments;
  std::vector<at::Tensor> second_moments;
};

class Optimizer {
 public:
  // `parameters` are leaf tensors whose grad() is defined (zeros before the
  // first backward) when Step() runs; the config must be valid.
  Optimizer(const OptimizerConfig& config, std::vector<at::Tensor> parameters);

  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Applies one update to every parameter and zeroes its gradient.
  void Step();
  // The same update from the parameters' gradients, applied to `values`
  // (one tensor per parameter, of its shape) instead of the parameters,
  // whose own values and autograd version stay as they are.
  void StepInto(const std::vector<at::Tensor>& values);

  // Updates applied so far.
  int64_t steps() const { return steps_; }

  // The current state; its tensors are the optimizer's own, not copies.
  OptimizerState state() const;
  // Continues from `state` (copied): INVALID_ARGUMENT, naming the entry,
  // when it does not fit the parameters (count, shape or dtype).
  absl::Status Restore(const OptimizerState& state);

 private:
  void SgdStep(const std::vector<at::Tensor>& values);
  void AdamWStep(const std::vector<at::Tensor>& values);

  const OptimizerConfig config_;
  std::vector<at::Tensor> parameters_;
  // SGD: the momentum buffers; AdamW: first and second moments. Undefined
  // until the first step.
  std::vector<at::Tensor> first_moments_;
  std::vector<at::Tensor> second_moments_;
  int64_t steps_ = 0;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_OPTIMIZER_H_
