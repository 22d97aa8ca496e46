#include "worker/model/layer_parts.h"

#include <ATen/ATen.h>
#include <torch/version.h>

#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/model/deterministic_random.h"

namespace chimera::worker {
namespace {

constexpr double kWeightStddev = 0.02;

}  // namespace

ParameterFactory::ParameterFactory(torch::nn::Module& layer,
                                   const ModelConfig& config,
                                   std::string layer_name, uint64_t seed)
    : layer_(layer),
      layer_name_(std::move(layer_name)),
      seed_(seed),
      options_(at::TensorOptions().dtype(config.dtype)) {}

at::Tensor ParameterFactory::Normal(const std::string& name,
                                    at::IntArrayRef sizes) {
  const uint64_t key = KeyOf(seed_, absl::StrCat(layer_name_, ".", name));
  return layer_.register_parameter(
      name, DeterministicNormal(sizes, kWeightStddev, key, options_));
}

at::Tensor ParameterFactory::Zeros(const std::string& name,
                                   at::IntArrayRef sizes) {
  return layer_.register_parameter(name, at::zeros(sizes, options_));
}

at::Tensor ParameterFactory::Ones(const std::string& name,
                                  at::IntArrayRef sizes) {
  return layer_.register_parameter(name, at::ones(sizes, options_));
}

// LibTorch 2 fuses this (flash attention on GPUs keeps no tokens × tokens
// matrix); 1.13 has no public fused kernel.
at::Tensor ScaledDotProductAttention(const at::Tensor& query,
                                     const at::Tensor& key,
                                     const at::Tensor& value, bool causal) {
#if TORCH_VERSION_MAJOR >= 2
  return at::scaled_dot_product_attention(query, key, value,
                                          /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                          /*is_causal=*/causal);
#else
  const int64_t tokens = query.size(-2);
  at::Tensor scores = at::matmul(query, key.transpose(-2, -1)) /
                      std::sqrt(static_cast<double>(query.size(-1)));
  if (causal) {
    const at::Tensor future =
        at::ones({tokens, tokens},
                 at::TensorOptions().dtype(at::kBool).device(query.device()))
            .triu(/*diagonal=*/1);
    scores =
        scores.masked_fill(future, -std::numeric_limits<double>::infinity());
  }
  return at::matmul(at::softmax(scores, /*dim=*/-1), value);
#endif
}

at::Tensor LayerNorm(const at::Tensor& input, const at::Tensor& weight,
                     const at::Tensor& bias) {
  return at::layer_norm(input, {input.size(-1)}, weight, bias, kNormEpsilon);
}

at::Tensor RmsNorm(const at::Tensor& input, const at::Tensor& weight) {
  const at::Tensor wide =
      input.scalar_type() == at::kBFloat16 ? input.to(at::kFloat) : input;
  const at::Tensor normed =
      wide * at::rsqrt(wide.pow(2).mean(-1, /*keepdim=*/true) + kNormEpsilon);
  return normed.to(input.scalar_type()) * weight;
}

}  // namespace chimera::worker
