// The layers a stage is made of: the token embedding (plus learned
// positions, except in Llama), the transformer block of each family, and the
// output head (final norm and projection to the vocabulary). No dropout:
// training is reproducible.
//
// GPT's and BERT's block is pre-norm: layer norm, multi-head self-attention,
// residual, layer norm, MLP with GELU, residual. Llama's is in
// llama_block.h. Each layer registers its parameters under short names
// ("qkv_weight") and initialises them from the name the stage registers the
// layer under ("embedding", "layer3", "head"), see ParameterFactory.
//
//   std::shared_ptr<Block> block = MakeBlock(config, "layer3", seed);
//   at::Tensor y = block->Forward(x);  // x, y: [batch, tokens, hidden]
#ifndef CHIMERA_WORKER_MODEL_LAYERS_H_
#define CHIMERA_WORKER_MODEL_LAYERS_H_

#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "worker/model/micro_batch.h"
#include "worker/model/model_config.h"

namespace chimera::worker {

// Token ids [batch, tokens] (int64, tokens <= seq_length) to hidden states
// [batch, tokens, hidden]: the token embedding, plus a learned position
// embedding in GPT and BERT (Llama's positions are rotary, in its blocks).
class TokenEmbedding : public torch::nn::Module {
 public:
  // kTokensOnly: the last stage's copy of a tied embedding, which the head
  // projects by and which never embeds positions.
  enum class Part { kWhole, kTokensOnly };

  TokenEmbedding(const ModelConfig& config, const std::string& name,
                 uint64_t seed, Part part = Part::kWhole);
  at::Tensor Forward(const at::Tensor& token_ids);

  // [vocab, hidden]: its gradient is zero outside the rows forwards used.
  const at::Tensor& token_weight() const { return token_weight_; }

 private:
  at::Tensor token_weight_;
  at::Tensor position_weight_;  // undefined in Llama and kTokensOnly
};

// A transformer block: hidden states [batch, tokens, hidden] to the same
// shape.
class Block : public torch::nn::Module {
 public:
  virtual at::Tensor Forward(const at::Tensor& hidden) = 0;
};

// The block of config.family, registering its parameters as `name`.
std::shared_ptr<Block> MakeBlock(const ModelConfig& config,
                                 const std::string& name, uint64_t seed);

// GPT's and BERT's block. Attention is causal (a token sees itself and
// earlier tokens) for GPT, bidirectional for BERT.
class TransformerBlock : public Block {
 public:
  TransformerBlock(const ModelConfig& config, const std::string& name,
                   uint64_t seed);
  at::Tensor Forward(const at::Tensor& hidden) override;

 private:
  at::Tensor SelfAttention(const at::Tensor& normed);

  int64_t num_heads_;
  bool causal_;
  at::Tensor norm1_weight_, norm1_bias_;
  at::Tensor qkv_weight_, qkv_bias_;
  at::Tensor attention_out_weight_, attention_out_bias_;
  at::Tensor norm2_weight_, norm2_bias_;
  at::Tensor mlp_in_weight_, mlp_in_bias_;
  at::Tensor mlp_out_weight_, mlp_out_bias_;
};

// Hidden states [batch, tokens, hidden] to logits [batch, tokens, vocab]:
// final norm (layer norm; RMSNorm in Llama), then a projection by a weight of
// its own (with a bias, except in Llama) or, with tied embeddings, by the
// token embedding's weight and no bias (GPT-2's head, and Llama 3.2's).
class OutputHead : public torch::nn::Module {
 public:
  // `tied_weight`: the token embedding's [vocab, hidden] weight, registered
  // elsewhere, when config.tie_embeddings; undefined otherwise.
  OutputHead(const ModelConfig& config, const std::string& name, uint64_t seed,
             at::Tensor tied_weight = {});
  at::Tensor Forward(const at::Tensor& hidden);
  // LanguageModelLoss(Forward(hidden), batch, normaliser), without holding
  // every token's logits at once (ProjectedLanguageModelLoss).
  absl::StatusOr<at::Tensor> Loss(const at::Tensor& hidden,
                                  const MicroBatch& batch, double normaliser);

 private:
  at::Tensor Normalize(const at::Tensor& hidden) const;

  at::Tensor norm_weight_, norm_bias_;  // no bias in Llama's RMSNorm
  at::Tensor output_weight_, output_bias_;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_MODEL_LAYERS_H_
