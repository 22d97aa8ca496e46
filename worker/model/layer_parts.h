// What the layers of every model family are built from: parameters
// initialised from their qualified names, attention, and the norms.
//
//   ParameterFactory parameters(*this, config, "layer3", seed);
//   weight_ = parameters.Normal("qkv_weight", {3 * hidden, hidden});
//   at::Tensor context = ScaledDotProductAttention(q, k, v, /*causal=*/true);
#ifndef CHIMERA_WORKER_MODEL_LAYER_PARTS_H_
#define CHIMERA_WORKER_MODEL_LAYER_PARTS_H_

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <string>

#include "worker/model/model_config.h"

namespace chimera::worker {

// Both norms' ε, as GPT-2's LayerNorm and Llama 3's RMSNorm use.
inline constexpr double kNormEpsilon = 1e-5;

// Registers the parameters of one layer on it, in config.dtype: weights
// N(0, 0.02²) drawn from KeyOf(seed, "<layer_name>.<name>"), so that a value
// depends only on the seed and the parameter's place in the whole model;
// biases 0; norm gains 1.
class ParameterFactory {
 public:
  ParameterFactory(torch::nn::Module& layer, const ModelConfig& config,
                   std::string layer_name, uint64_t seed);

  at::Tensor Normal(const std::string& name, at::IntArrayRef sizes);
  at::Tensor Zeros(const std::string& name, at::IntArrayRef sizes);
  at::Tensor Ones(const std::string& name, at::IntArrayRef sizes);

 private:
  torch::nn::Module& layer_;
  const std::string layer_name_;
  const uint64_t seed_;
  const at::TensorOptions options_;
};

// softmax(query keyᵀ / √head_size) value over [batch, heads, tokens,
// head_size]; with `causal`, each token attends to itself and the tokens
// before it.
at::Tensor ScaledDotProductAttention(const at::Tensor& query,
                                     const at::Tensor& key,
                                     const at::Tensor& value, bool causal);

// GPT's and BERT's norm over the last dimension.
at::Tensor LayerNorm(const at::Tensor& input, const at::Tensor& weight,
                     const at::Tensor& bias);

// Llama's: input / sqrt(mean(input²) + ε) · weight over the last dimension,
// the mean taken in float32 at least (as Llama's reference does for bfloat16).
at::Tensor RmsNorm(const at::Tensor& input, const at::Tensor& weight);

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_MODEL_LAYER_PARTS_H_
