// Llama's transformer block, in the layout of Hugging Face's LlamaModel so
// that weights map one to one:
//
//   x = x + o(attention(rope(q(n)), rope(k(n)), v(n)))   n = RMSNorm(x)
//   x = x + down(silu(gate(m)) · up(m))                   m = RMSNorm(x)
//
// Attention is causal and grouped-query: num_kv_heads key/value heads, each
// shared by num_heads / num_kv_heads consecutive query heads. Rotary
// embeddings rotate the two halves of each head (Hugging Face's rotate_half,
// not Meta's interleaved pairs). No biases. q, k and v are one fused weight
// (rows: q's heads, then k's, then v's), and so are gate and up.
//
//   LlamaBlock block(config, "layer3", seed);
//   at::Tensor y = block.Forward(x);  // x, y: [batch, tokens, hidden]
#ifndef CHIMERA_WORKER_MODEL_LLAMA_BLOCK_H_
#define CHIMERA_WORKER_MODEL_LLAMA_BLOCK_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "worker/model/layers.h"
#include "worker/model/model_config.h"

namespace chimera::worker {

// x [batch, heads, tokens, head_size] rotated by position: each head's
// halves (a, b) at position p become (a cos θ − b sin θ, b cos θ + a sin θ)
// with θ = p · ω_i, ω = RotaryFrequencies(head_size, theta, scaling).
at::Tensor ApplyRotaryEmbedding(const at::Tensor& x, double theta,
                                const RopeScaling& scaling = {});

// The rotary frequencies of a head's half, [head_size / 2] float64:
// ω_i = theta^(−2i / head_size), scaled as `scaling` says.
at::Tensor RotaryFrequencies(int64_t head_size, double theta,
                             const RopeScaling& scaling);

class LlamaBlock : public Block {
 public:
  LlamaBlock(const ModelConfig& config, const std::string& name, uint64_t seed);
  at::Tensor Forward(const at::Tensor& hidden) override;

 private:
  at::Tensor SelfAttention(const at::Tensor& normed);

  int64_t num_heads_;
  int64_t num_kv_heads_;
  double rope_theta_;
  RopeScaling rope_scaling_;
  at::Tensor attention_norm_weight_;
  at::Tensor qkv_weight_;
  at::Tensor attention_out_weight_;
  at::Tensor mlp_norm_weight_;
  at::Tensor gate_up_weight_;
  at::Tensor down_weight_;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_MODEL_LLAMA_BLOCK_H_
