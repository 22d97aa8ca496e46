#include "worker/model/layers.h"

#include <ATen/ATen.h>
#include <torch/version.h>

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "worker/model/deterministic_random.h"
#include "worker/model/loss.h"

namespace chimera::worker {
namespace {

constexpr double kWeightStddev = 0.02;
constexpr double kLayerNormEpsilon = 1e-5;

// softmax(query keyᵀ / √head_size) value; with CAUSAL, each token attends
// to itself and the tokens before it. LibTorch 2 fuses this (flash attention
// on GPUs keeps no tokens × tokens matrix); 1.13 has no public fused kernel.
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

// Registers the parameters of one layer, initialised from the layer's name.
class ParameterFactory {
 public:
  ParameterFactory(torch::nn::Module& layer, const ModelConfig& config,
                   const std::string& layer_name, uint64_t seed)
      : layer_(layer),
        layer_name_(layer_name),
        seed_(seed),
        options_(at::TensorOptions().dtype(config.dtype)) {}

  at::Tensor Normal(const std::string& name, at::IntArrayRef sizes) {
    const uint64_t key = KeyOf(seed_, absl::StrCat(layer_name_, ".", name));
    return layer_.register_parameter(
        name, DeterministicNormal(sizes, kWeightStddev, key, options_));
  }
  at::Tensor Zeros(const std::string& name, at::IntArrayRef sizes) {
    return layer_.register_parameter(name, at::zeros(sizes, options_));
  }
  at::Tensor Ones(const std::string& name, at::IntArrayRef sizes) {
    return layer_.register_parameter(name, at::ones(sizes, options_));
  }

 private:
  torch::nn::Module& layer_;
  const std::string& layer_name_;
  const uint64_t seed_;
  const at::TensorOptions options_;
};

}  // namespace

TokenEmbedding::TokenEmbedding(const ModelConfig& config,
                               const std::string& name, uint64_t seed) {
  ParameterFactory parameters(*this, config, name, seed);
  token_weight_ = parameters.Normal("token_weight",
                                    {config.vocab_size, config.hidden_size});
  position_weight_ = parameters.Normal("position_weight",
                                       {config.seq_length, config.hidden_size});
}

at::Tensor TokenEmbedding::Forward(const at::Tensor& token_ids) {
  const int64_t tokens = token_ids.size(1);
  return at::embedding(token_weight_, token_ids) +
         position_weight_.slice(/*dim=*/0, 0, tokens);
}

TransformerBlock::TransformerBlock(const ModelConfig& config,
                                   const std::string& name, uint64_t seed)
    : num_heads_(config.num_heads),
      causal_(config.family == ModelFamily::kGpt) {
  ParameterFactory parameters(*this, config, name, seed);
  const int64_t hidden = config.hidden_size;
  const int64_t ffn = config.ffn_size;
  norm1_weight_ = parameters.Ones("norm1_weight", {hidden});
  norm1_bias_ = parameters.Zeros("norm1_bias", {hidden});
  qkv_weight_ = parameters.Normal("qkv_weight", {3 * hidden, hidden});
  qkv_bias_ = parameters.Zeros("qkv_bias", {3 * hidden});
  attention_out_weight_ =
      parameters.Normal("attention_out_weight", {hidden, hidden});
  attention_out_bias_ = parameters.Zeros("attention_out_bias", {hidden});
  norm2_weight_ = parameters.Ones("norm2_weight", {hidden});
  norm2_bias_ = parameters.Zeros("norm2_bias", {hidden});
  mlp_in_weight_ = parameters.Normal("mlp_in_weight", {ffn, hidden});
  mlp_in_bias_ = parameters.Zeros("mlp_in_bias", {ffn});
  mlp_out_weight_ = parameters.Normal("mlp_out_weight", {hidden, ffn});
  mlp_out_bias_ = parameters.Zeros("mlp_out_bias", {hidden});
}

at::Tensor TransformerBlock::SelfAttention(const at::Tensor& normed) {
  const int64_t batch = normed.size(0);
  const int64_t tokens = normed.size(1);
  const int64_t hidden = normed.size(2);
  const int64_t head_size = hidden / num_heads_;
  // [batch, tokens, 3 * hidden] -> 3 × [batch, heads, tokens, head_size].
  const std::vector<at::Tensor> qkv =
      at::linear(normed, qkv_weight_, qkv_bias_)
          .view({batch, tokens, 3, num_heads_, head_size})
          .permute({2, 0, 3, 1, 4})
          .unbind(0);
  const at::Tensor context =
      ScaledDotProductAttention(qkv[0], qkv[1], qkv[2], causal_)
          .transpose(1, 2)
          .reshape({batch, tokens, hidden});
  return at::linear(context, attention_out_weight_, attention_out_bias_);
}

at::Tensor TransformerBlock::Forward(const at::Tensor& hidden) {
  const int64_t width = hidden.size(-1);
  const at::Tensor attended =
      hidden + SelfAttention(at::layer_norm(hidden, {width}, norm1_weight_,
                                            norm1_bias_, kLayerNormEpsilon));
  const at::Tensor normed = at::layer_norm(attended, {width}, norm2_weight_,
                                           norm2_bias_, kLayerNormEpsilon);
  return attended +
         at::linear(at::gelu(at::linear(normed, mlp_in_weight_, mlp_in_bias_)),
                    mlp_out_weight_, mlp_out_bias_);
}

OutputHead::OutputHead(const ModelConfig& config, const std::string& name,
                       uint64_t seed) {
  ParameterFactory parameters(*this, config, name, seed);
  norm_weight_ = parameters.Ones("norm_weight", {config.hidden_size});
  norm_bias_ = parameters.Zeros("norm_bias", {config.hidden_size});
  output_weight_ = parameters.Normal("output_weight",
                                     {config.vocab_size, config.hidden_size});
  output_bias_ = parameters.Zeros("output_bias", {config.vocab_size});
}

at::Tensor OutputHead::Normalize(const at::Tensor& hidden) const {
  return at::layer_norm(hidden, {hidden.size(-1)}, norm_weight_, norm_bias_,
                        kLayerNormEpsilon);
}

at::Tensor OutputHead::Forward(const at::Tensor& hidden) {
  return at::linear(Normalize(hidden), output_weight_, output_bias_);
}

absl::StatusOr<at::Tensor> OutputHead::Loss(const at::Tensor& hidden,
                                            const MicroBatch& batch,
                                            double normaliser) {
  return ProjectedLanguageModelLoss(Normalize(hidden), output_weight_,
                                    output_bias_, batch, normaliser);
}

}  // namespace chimera::worker
