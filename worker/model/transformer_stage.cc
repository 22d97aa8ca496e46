#include "worker/model/transformer_stage.h"

#include <ATen/ATen.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace chimera::worker {

TransformerStage::TransformerStage(const ModelConfig& config, LayerRange layers,
                                   uint64_t seed)
    : Stage(layers, config.num_layers), config_(config) {
  if (is_first() || (is_last() && config.tie_embeddings)) {
    const auto part = is_first() ? TokenEmbedding::Part::kWhole
                                 : TokenEmbedding::Part::kTokensOnly;
    embedding_ = register_module(
        "embedding",
        std::make_shared<TokenEmbedding>(config, "embedding", seed, part));
  }
  for (int64_t i = layers.begin; i < layers.end; ++i) {
    const std::string name = absl::StrCat("layer", i);
    blocks_.push_back(register_module(name, MakeBlock(config, name, seed)));
  }
  if (is_last()) {
    head_ = register_module("head", std::make_shared<OutputHead>(
                                        config, "head", seed, tied_weight()));
  }
}

at::Tensor TransformerStage::token_table() const {
  if (!is_first()) return {};
  return embedding_->token_weight();
}

at::Tensor TransformerStage::tied_weight() const {
  if (!config_.tie_embeddings || embedding_ == nullptr) return {};
  return embedding_->token_weight();
}

at::Tensor TransformerStage::Hidden(const at::Tensor& input) {
  at::Tensor hidden = is_first() ? embedding_->Forward(input) : input;
  for (const auto& block : blocks_) hidden = block->Forward(hidden);
  return hidden;
}

at::Tensor TransformerStage::Forward(const at::Tensor& input) {
  const at::Tensor hidden = Hidden(input);
  return is_last() ? head_->Forward(hidden) : hidden;
}

absl::StatusOr<at::Tensor> TransformerStage::LastStageLoss(
    const at::Tensor& input, const MicroBatch& batch, double normaliser) {
  return head_->Loss(Hidden(input), batch, normaliser);
}

absl::StatusOr<std::shared_ptr<TransformerStage>> BuildTransformerStage(
    const ModelConfig& config, LayerRange layers, uint64_t seed,
    c10::Device device) {
  RETURN_IF_ERROR(ValidateModelConfig(config));
  RETURN_IF_ERROR(ValidateLayerRange(config, layers));
  auto stage = std::make_shared<TransformerStage>(config, layers, seed);
  if (!device.is_cpu()) stage->to(device);
  return stage;
}

}  // namespace chimera::worker
