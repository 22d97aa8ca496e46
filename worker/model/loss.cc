#include "worker/model/loss.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace chimera::worker {
namespace {

// On the CPU a chunk's logits hold about this many values (32 MiB in
// float32): larger chunks save little time, smaller ones give matrix
// products too thin to run at speed.
constexpr int64_t kChunkLogits = int64_t{1} << 23;
// The fewest tokens of a chunk on a GPU (see DefaultChunkTokens).
constexpr int64_t kGpuChunkTokens = 4096;

absl::Status CheckLoss(const MicroBatch& batch, double normaliser,
                       at::IntArrayRef positions) {
  if (!(normaliser > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("loss normaliser is ", normaliser, "; it must be > 0"));
  }
  if (positions.size() < 2 || positions[0] != batch.targets.size(0) ||
      positions[1] != batch.targets.size(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("logits must be [batch, seq, vocab] matching targets [",
                     batch.targets.size(0), ", ", batch.targets.size(1),
                     "]; got ", c10::str(positions)));
  }
  return absl::OkStatus();
}

// Each token's share of the micro-batch's loss: a sample's loss positions
// share its 1 / normaliser evenly. [batch * seq], in `type`.
at::Tensor TokenWeights(const MicroBatch& batch, double normaliser,
                        c10::Device device, c10::ScalarType type) {
  const at::Tensor mask = batch.loss_mask.to(device, type);
  return (mask / mask.sum(1, /*keepdim=*/true) / normaliser).reshape({-1});
}

// What one pass over the chunks gives: the loss, and the gradients of
// normed, weight and bias (when there is one) when asked.
struct ChunkedLoss {
  at::Tensor loss;
  at::Tensor normed_gradient, weight_gradient, bias_gradient;
};

// The loss of `normed` [tokens, hidden] projected by weight and bias, in
// chunks of `chunk` tokens, computed in `compute` (float32 for bfloat16).
// The gradient of a token's cross-entropy in its logits is
// softmax - one-hot(target); scaled by the token's weight it is the
// gradient of the loss.
ChunkedLoss ProjectInChunks(const at::Tensor& normed, const at::Tensor& weight,
                            const at::Tensor& bias, const at::Tensor& targets,
                            const at::Tensor& token_weights, int64_t chunk,
                            bool with_gradients) {
  const c10::ScalarType compute = token_weights.scalar_type();
  ChunkedLoss result;
  result.loss = at::zeros({}, token_weights.options());
  if (with_gradients) {
    result.normed_gradient = at::empty_like(normed);
    result.weight_gradient =
        at::zeros_like(weight, weight.options().dtype(compute));
    if (bias.defined()) {
      result.bias_gradient =
          at::zeros_like(bias, bias.options().dtype(compute));
    }
  }
  for (int64_t begin = 0; begin < normed.size(0); begin += chunk) {
    const int64_t end = std::min(begin + chunk, normed.size(0));
    const at::Tensor inputs = normed.slice(0, begin, end);
    const at::Tensor logits = at::linear(inputs, weight, bias).to(compute);
    const at::Tensor target = targets.slice(0, begin, end).unsqueeze(1);
    const at::Tensor share = token_weights.slice(0, begin, end);
    const at::Tensor log_total = logits.logsumexp(1, /*keepdim=*/true);
    result.loss +=
        ((log_total - logits.gather(1, target)).squeeze(1) * share).sum();
    if (!with_gradients) continue;
    at::Tensor logit_gradient = (logits - log_total).exp_();
    logit_gradient.scatter_add_(1, target,
                                at::full_like(target, -1, logits.options()));
    logit_gradient.mul_(share.unsqueeze(1));
    const at::Tensor in_model_type = logit_gradient.to(normed.scalar_type());
    at::Tensor rows = result.normed_gradient.slice(0, begin, end);
    at::mm_out(rows, in_model_type, weight);
    // Accumulated in place: a temporary of the weight's size per chunk
    // would cost more memory traffic than the products themselves.
    if (weight.scalar_type() == compute) {
      result.weight_gradient.addmm_(in_model_type.t(), inputs);
    } else {
      result.weight_gradient.add_(
          at::mm(in_model_type.t(), inputs).to(compute));
    }
    if (bias.defined()) result.bias_gradient.add_(logit_gradient.sum(0));
  }
  return result;
}

// The chunked loss as one autograd node: its forward computes the
// gradients, its backward scales them by the loss's gradient. LibTorch 1.13
// takes no undefined tensor as a custom function's input: an empty `bias`
// stands for none (NoBias).
class ChunkedProjectionLoss
    : public torch::autograd::Function<ChunkedProjectionLoss> {
 public:
  static at::Tensor NoBias(const at::Tensor& weight) {
    return at::empty({0}, weight.options());
  }

  static at::Tensor forward(torch::autograd::AutogradContext* context,
                            const at::Tensor& normed, const at::Tensor& weight,
                            const at::Tensor& given_bias,
                            const at::Tensor& targets,
                            const at::Tensor& token_weights, int64_t chunk) {
    const at::Tensor bias = given_bias.numel() == 0 ? at::Tensor() : given_bias;
    ChunkedLoss result = ProjectInChunks(normed, weight, bias, targets,
                                         token_weights, chunk, true);
    context->save_for_backward(
        {result.normed_gradient,
         result.weight_gradient.to(weight.scalar_type()),
         bias.defined() ? result.bias_gradient.to(bias.scalar_type())
                        : at::Tensor()});
    return result.loss;
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* context,
      torch::autograd::variable_list output_gradients) {
    const torch::autograd::variable_list saved = context->get_saved_variables();
    const at::Tensor& scale = output_gradients[0];
    const auto scaled = [&](const at::Tensor& gradient) {
      return gradient.defined() ? gradient * scale.to(gradient.scalar_type())
                                : at::Tensor();
    };
    return {scaled(saved[0]), scaled(saved[1]), scaled(saved[2]),
            at::Tensor(),     at::Tensor(),     at::Tensor()};
  }
};

}  // namespace

absl::StatusOr<at::Tensor> LanguageModelLoss(const at::Tensor& logits,
                                             const MicroBatch& batch,
                                             double normaliser) {
  if (!logits.defined() || logits.dim() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "logits must be [batch, seq, vocab]; got ",
        logits.defined() ? c10::str(logits.sizes()) : "undefined"));
  }
  if (const absl::Status valid = CheckLoss(batch, normaliser, logits.sizes());
      !valid.ok()) {
    return valid;
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

int64_t DefaultChunkTokens(int64_t vocab_size, c10::Device device) {
  const int64_t fitting = std::max<int64_t>(1, kChunkLogits / vocab_size);
  return device.is_cpu() ? fitting : std::max(fitting, kGpuChunkTokens);
}

absl::StatusOr<at::Tensor> ProjectedLanguageModelLoss(
    const at::Tensor& normed, const at::Tensor& weight, const at::Tensor& bias,
    const MicroBatch& batch, double normaliser, int64_t chunk_tokens) {
  if (!normed.defined() || normed.dim() != 3 || weight.dim() != 2 ||
      weight.size(1) != normed.size(2) ||
      (bias.defined() && (bias.dim() != 1 || bias.size(0) != weight.size(0)))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the projection of hidden states [batch, seq, hidden] by a weight "
        "[vocab, hidden] and a bias [vocab] does not chain: ",
        normed.defined() ? c10::str(normed.sizes()) : "undefined", ", ",
        c10::str(weight.sizes()), ", ",
        bias.defined() ? c10::str(bias.sizes()) : "no bias"));
  }
  if (const absl::Status valid = CheckLoss(batch, normaliser, normed.sizes());
      !valid.ok()) {
    return valid;
  }
  const at::Tensor tokens = normed.reshape({-1, normed.size(2)});
  // The chunks keep the weight's gradient from the forward to the backward:
  // no more than the logits they spare only while the micro-batch has at
  // least as many tokens as the hidden size. Below that the logits are the
  // smaller, and the planner's memory model (two logits' worth per sample)
  // a bound either way.
  if (chunk_tokens == 0 && tokens.size(0) < weight.size(1)) {
    return LanguageModelLoss(at::linear(normed, weight, bias), batch,
                             normaliser);
  }
  // bfloat16 logits would lose the loss in rounding: compute in float32.
  const c10::ScalarType compute =
      normed.scalar_type() == at::kBFloat16 ? at::kFloat : normed.scalar_type();
  const at::Tensor targets = batch.targets.to(normed.device()).reshape({-1});
  const at::Tensor token_weights =
      TokenWeights(batch, normaliser, normed.device(), compute);
  const int64_t chunk =
      chunk_tokens > 0 ? chunk_tokens
                       : DefaultChunkTokens(weight.size(0), normed.device());
  const bool with_gradients =
      at::GradMode::is_enabled() &&
      (normed.requires_grad() || weight.requires_grad() ||
       (bias.defined() && bias.requires_grad()));
  const at::Tensor loss =
      with_gradients
          ? ChunkedProjectionLoss::apply(
                tokens, weight,
                bias.defined() ? bias : ChunkedProjectionLoss::NoBias(weight),
                targets, token_weights, chunk)
          : ProjectInChunks(tokens, weight, bias, targets, token_weights, chunk,
                            false)
                .loss;
  return loss.to(normed.scalar_type());
}

}  // namespace chimera::worker
