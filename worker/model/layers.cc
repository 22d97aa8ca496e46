#include "worker/model/layers.h"

#include <ATen/ATen.h>

#include <utility>
#include <vector>

#include "worker/model/layer_parts.h"
#include "worker/model/llama_block.h"
#include "worker/model/loss.h"

namespace chimera::worker {

TokenEmbedding::TokenEmbedding(const ModelConfig& config,
                               const std::string& name, uint64_t seed,
                               Part part) {
  ParameterFactory parameters(*this, config, name, seed);
  token_weight_ = parameters.Normal("token_weight",
                                    {config.vocab_size, config.hidden_size});
  if (config.family != ModelFamily::kLlama && part == Part::kWhole) {
    position_weight_ = parameters.Normal(
        "position_weight", {config.seq_length, config.hidden_size});
  }
}

at::Tensor TokenEmbedding::Forward(const at::Tensor& token_ids) {
  const at::Tensor tokens = at::embedding(token_weight_, token_ids);
  if (!position_weight_.defined()) return tokens;
  return tokens + position_weight_.slice(/*dim=*/0, 0, token_ids.size(1));
}

std::shared_ptr<Block> MakeBlock(const ModelConfig& config,
                                 const std::string& name, uint64_t seed) {
  if (config.family == ModelFamily::kLlama) {
    return std::make_shared<LlamaBlock>(config, name, seed);
  }
  return std::make_shared<TransformerBlock>(config, name, seed);
}

TransformerBlock::TransformerBlock(const ModelConfig& config,
                                   const std::string& name, uint64_t seed)
    : num_heads_(config.num_heads), causal_(IsDecoder(config.family)) {
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
  const at::Tensor attended =
      hidden + SelfAttention(LayerNorm(hidden, norm1_weight_, norm1_bias_));
  const at::Tensor normed = LayerNorm(attended, norm2_weight_, norm2_bias_);
  return attended +
         at::linear(at::gelu(at::linear(normed, mlp_in_weight_, mlp_in_bias_)),
                    mlp_out_weight_, mlp_out_bias_);
}

OutputHead::OutputHead(const ModelConfig& config, const std::string& name,
                       uint64_t seed, at::Tensor tied_weight)
    : output_weight_(std::move(tied_weight)) {
  ParameterFactory parameters(*this, config, name, seed);
  const bool llama = config.family == ModelFamily::kLlama;
  norm_weight_ = parameters.Ones("norm_weight", {config.hidden_size});
  if (!llama) norm_bias_ = parameters.Zeros("norm_bias", {config.hidden_size});
  if (output_weight_.defined()) return;
  output_weight_ = parameters.Normal("output_weight",
                                     {config.vocab_size, config.hidden_size});
  if (!llama) {
    output_bias_ = parameters.Zeros("output_bias", {config.vocab_size});
  }
}

at::Tensor OutputHead::Normalize(const at::Tensor& hidden) const {
  return norm_bias_.defined() ? LayerNorm(hidden, norm_weight_, norm_bias_)
                              : RmsNorm(hidden, norm_weight_);
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
