// A pipeline stage of one of our own transformer families (ModelConfig): a
// contiguous range of its blocks, plus the embedding on the first stage and
// the output head on the last. The whole model is the stage of all layers,
// and it has exactly the parameters of the union of any partition into
// stages (same names, same values), because each parameter is initialised
// from the job seed and its qualified name alone.
//
// Parameter names are global: "embedding.token_weight",
// "layer<i>.qkv_weight" with i the block's index in the whole model,
// "head.output_weight". With tied embeddings the head projects by the
// embedding's weight, so the last stage holds a copy of it under the same
// name, "embedding.token_weight" (and no "head.output_weight"); the runtime
// keeps the copies equal (see worker/runtime/tied_embedding_sync.h).
//
//   ASSIGN_OR_RETURN(std::shared_ptr<TransformerStage> stage,
//                    BuildTransformerStage(config, LayerRange{2, 4}, seed));
//   at::Tensor out = stage->Forward(in);  // activations to send on
#ifndef CHIMERA_WORKER_MODEL_TRANSFORMER_STAGE_H_
#define CHIMERA_WORKER_MODEL_TRANSFORMER_STAGE_H_

#include <c10/core/Device.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/model/layers.h"
#include "worker/model/micro_batch.h"
#include "worker/model/model_config.h"
#include "worker/model/stage.h"

namespace chimera::worker {

class TransformerStage : public Stage {
 public:
  // Requires a valid config and range (see BuildTransformerStage, which
  // checks them).
  TransformerStage(const ModelConfig& config, LayerRange layers, uint64_t seed);

  // The first stage takes token ids [batch, tokens] (int64, each in
  // [0, vocab_size), tokens <= seq_length); the others take the previous
  // stage's output. The last stage returns logits [batch, tokens, vocab], the
  // others hidden states [batch, tokens, hidden] in the model's dtype.
  // Throws c10::Error when given a tensor of another shape or type.
  at::Tensor Forward(const at::Tensor& input) override;

  const ModelConfig& config() const { return config_; }
  // The first stage's token embedding weight; undefined on the others.
  at::Tensor token_table() const override;
  // With tied embeddings, the token embedding's weight on the first and the
  // last stage; undefined otherwise.
  at::Tensor tied_weight() const override;

 private:
  // LanguageModelLoss(Forward(input), batch, normaliser), computed without
  // holding every token's logits at once (OutputHead::Loss).
  absl::StatusOr<at::Tensor> LastStageLoss(const at::Tensor& input,
                                           const MicroBatch& batch,
                                           double normaliser) override;
  // The embedding (first stage) and blocks: everything but the head.
  at::Tensor Hidden(const at::Tensor& input);

  const ModelConfig config_;
  // The first stage's; with tied embeddings the last stage's too.
  std::shared_ptr<TokenEmbedding> embedding_;
  std::vector<std::shared_ptr<Block>> blocks_;
  std::shared_ptr<OutputHead> head_;  // last stage only
};

// Builds the stage of `layers` with parameters in config.dtype on `device`.
// INVALID_ARGUMENT when the config or the range is invalid.
absl::StatusOr<std::shared_ptr<TransformerStage>> BuildTransformerStage(
    const ModelConfig& config, LayerRange layers, uint64_t seed,
    c10::Device device = c10::Device(c10::DeviceType::CPU));

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_MODEL_TRANSFORMER_STAGE_H_
