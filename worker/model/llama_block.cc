#include "worker/model/llama_block.h"

#include <ATen/ATen.h>

#include <cmath>
#include <utility>
#include <vector>

#include "worker/model/layer_parts.h"

namespace chimera::worker {
namespace {

// cos θ and sin θ for every position and element of a head [tokens,
// head_size], both halves alike. Computed in float64 whatever the model's
// type, then rounded to it.
std::pair<at::Tensor, at::Tensor> RotaryTables(int64_t tokens,
                                               int64_t head_size, double theta,
                                               const RopeScaling& scaling,
                                               const at::TensorOptions& like) {
  const at::Tensor frequencies =
      RotaryFrequencies(head_size, theta, scaling).to(like.device());
  const at::Tensor angles =
      at::outer(at::arange(tokens, like.dtype(at::kDouble)), frequencies);
  const at::Tensor both_halves = at::cat({angles, angles}, /*dim=*/-1);
  return {both_halves.cos().to(like.dtype()),
          both_halves.sin().to(like.dtype())};
}

// (a, b) -> (−b, a) over a head's two halves.
at::Tensor RotateHalf(const at::Tensor& x) {
  const std::vector<at::Tensor> halves = x.chunk(2, /*dim=*/-1);
  return at::cat({-halves[1], halves[0]}, /*dim=*/-1);
}

// [batch, kv_heads, tokens, head_size] -> [batch, kv_heads * group, ...],
// each key/value head repeated for the `group` query heads it serves.
at::Tensor RepeatKeyValueHeads(const at::Tensor& x, int64_t group) {
  if (group == 1) return x;
  const int64_t batch = x.size(0), heads = x.size(1);
  const int64_t tokens = x.size(2), head_size = x.size(3);
  return x.unsqueeze(2)
      .expand({batch, heads, group, tokens, head_size})
      .reshape({batch, heads * group, tokens, head_size});
}

// x rotated by the tables of RotaryTables.
at::Tensor Rotate(const at::Tensor& x, const at::Tensor& cos,
                  const at::Tensor& sin) {
  return x * cos + RotateHalf(x) * sin;
}

}  // namespace

at::Tensor ApplyRotaryEmbedding(const at::Tensor& x, double theta,
                                const RopeScaling& scaling) {
  const auto [cos, sin] =
      RotaryTables(x.size(-2), x.size(-1), theta, scaling, x.options());
  return Rotate(x, cos, sin);
}

at::Tensor RotaryFrequencies(int64_t head_size, double theta,
                             const RopeScaling& scaling) {
  const at::Tensor frequencies =
      at::pow(theta, -at::arange(0, head_size, 2, at::kDouble) /
                         static_cast<double>(head_size));
  if (scaling.factor == 1) return frequencies;
  // 0 for wavelengths of original_context / low_frequency_factor and longer
  // (divided by the factor), 1 for original_context / high_frequency_factor
  // and shorter (kept), linear in the frequency between.
  const at::Tensor wavelengths = 2 * M_PI / frequencies;
  const at::Tensor kept =
      ((scaling.original_context / wavelengths - scaling.low_frequency_factor) /
       (scaling.high_frequency_factor - scaling.low_frequency_factor))
          .clamp(0, 1);
  return (1 - kept) * frequencies / scaling.factor + kept * frequencies;
}

LlamaBlock::LlamaBlock(const ModelConfig& config, const std::string& name,
                       uint64_t seed)
    : num_heads_(config.num_heads),
      num_kv_heads_(config.num_kv_heads),
      rope_theta_(config.rope_theta),
      rope_scaling_(config.rope_scaling) {
  ParameterFactory parameters(*this, config, name, seed);
  const int64_t hidden = config.hidden_size;
  const int64_t kv_width = hidden / num_heads_ * num_kv_heads_;
  attention_norm_weight_ = parameters.Ones("attention_norm_weight", {hidden});
  qkv_weight_ =
      parameters.Normal("qkv_weight", {hidden + 2 * kv_width, hidden});
  attention_out_weight_ =
      parameters.Normal("attention_out_weight", {hidden, hidden});
  mlp_norm_weight_ = parameters.Ones("mlp_norm_weight", {hidden});
  gate_up_weight_ =
      parameters.Normal("gate_up_weight", {2 * config.ffn_size, hidden});
  down_weight_ = parameters.Normal("down_weight", {hidden, config.ffn_size});
}

at::Tensor LlamaBlock::SelfAttention(const at::Tensor& normed) {
  const int64_t batch = normed.size(0);
  const int64_t tokens = normed.size(1);
  const int64_t hidden = normed.size(2);
  const int64_t head_size = hidden / num_heads_;
  const int64_t kv_width = head_size * num_kv_heads_;
  const std::vector<at::Tensor> qkv = at::linear(normed, qkv_weight_)
                                          .split({hidden, kv_width, kv_width},
                                                 /*dim=*/-1);
  // [batch, tokens, heads * head_size] -> [batch, heads, tokens, head_size].
  const auto heads = [&](const at::Tensor& x, int64_t count) {
    return x.view({batch, tokens, count, head_size}).transpose(1, 2);
  };
  const int64_t group = num_heads_ / num_kv_heads_;
  const auto [cos, sin] = RotaryTables(tokens, head_size, rope_theta_,
                                       rope_scaling_, normed.options());
  const at::Tensor query = Rotate(heads(qkv[0], num_heads_), cos, sin);
  const at::Tensor key = RepeatKeyValueHeads(
      Rotate(heads(qkv[1], num_kv_heads_), cos, sin), group);
  const at::Tensor value =
      RepeatKeyValueHeads(heads(qkv[2], num_kv_heads_), group);
  const at::Tensor context =
      ScaledDotProductAttention(query, key, value, /*causal=*/true)
          .transpose(1, 2)
          .reshape({batch, tokens, hidden});
  return at::linear(context, attention_out_weight_);
}

at::Tensor LlamaBlock::Forward(const at::Tensor& hidden) {
  const at::Tensor attended =
      hidden + SelfAttention(RmsNorm(hidden, attention_norm_weight_));
  const std::vector<at::Tensor> gate_up =
      at::linear(RmsNorm(attended, mlp_norm_weight_), gate_up_weight_)
          .chunk(2, /*dim=*/-1);
  return attended + at::linear(at::silu(gate_up[0]) * gate_up[1], down_weight_);
}

}  // namespace chimera::worker
