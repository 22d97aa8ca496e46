#include "worker/model/stage.h"

#include <ATen/ATen.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace chimera::worker {

Stage::Stage(const ModelConfig& config, LayerRange layers, uint64_t seed)
    : config_(config), layers_(layers) {
  const bool last = layers.end == config.num_layers;
  if (layers.begin == 0 || (last && config.tie_embeddings)) {
    const auto part = layers.begin == 0 ? TokenEmbedding::Part::kWhole
                                        : TokenEmbedding::Part::kTokensOnly;
    embedding_ = register_module(
        "embedding",
        std::make_shared<TokenEmbedding>(config, "embedding", seed, part));
  }
  for (int64_t i = layers.begin; i < layers.end; ++i) {
    const std::string name = absl::StrCat("layer", i);
    blocks_.push_back(register_module(name, MakeBlock(config, name, seed)));
  }
  if (last) {
    head_ = register_module("head", std::make_shared<OutputHead>(
                                        config, "head", seed, tied_weight()));
  }
}

at::Tensor Stage::tied_weight() const {
  if (!config_.tie_embeddings || embedding_ == nullptr) return {};
  return embedding_->token_weight();
}

at::Tensor Stage::Hidden(const at::Tensor& input) {
  at::Tensor hidden = is_first() ? embedding_->Forward(input) : input;
  for (const auto& block : blocks_) hidden = block->Forward(hidden);
  return hidden;
}

at::Tensor Stage::Forward(const at::Tensor& input) {
  const at::Tensor hidden = Hidden(input);
  return is_last() ? head_->Forward(hidden) : hidden;
}

absl::StatusOr<at::Tensor> Stage::Loss(const at::Tensor& input,
                                       const MicroBatch& batch,
                                       double normaliser) {
  if (!is_last()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the loss is the last stage's; this stage ends at block ",
                     layers_.end));
  }
  return head_->Loss(Hidden(input), batch, normaliser);
}

absl::StatusOr<std::shared_ptr<Stage>> BuildStage(const ModelConfig& config,
                                                  LayerRange layers,
                                                  uint64_t seed,
                                                  c10::Device device) {
  RETURN_IF_ERROR(ValidateModelConfig(config));
  RETURN_IF_ERROR(ValidateLayerRange(config, layers));
  auto stage = std::make_shared<Stage>(config, layers, seed);
  if (!device.is_cpu()) stage->to(device);
  return stage;
}

}  // namespace chimera::worker
