// One pipeline stage of a model: a contiguous range of its blocks, plus the
// embedding on the first stage and the head and the loss on the last. What
// the program executor computes with, whatever defines the model: one of our
// own transformer families (transformer_stage.h) or a user's TorchScript
// pieces (scripted_stage.h).
//
// A stage's parameters are registered under global names, the same in every
// partition of the model, so that the stages of any partition hold exactly
// the whole model's parameters: gradient groups, checkpoints and exported
// weights match them by name.
//
//   std::shared_ptr<Stage> stage = ...;  // blocks [2, 4) of 4
//   ASSIGN_OR_RETURN(at::Tensor loss, stage->Loss(hidden, batch, samples));
//   loss.backward();
#ifndef CHIMERA_WORKER_MODEL_STAGE_H_
#define CHIMERA_WORKER_MODEL_STAGE_H_

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "worker/model/micro_batch.h"
#include "worker/model/model_config.h"

namespace chimera::worker {

class Stage : public torch::nn::Module {
 public:
  // The stage of blocks `layers` of a model of `num_layers` blocks.
  Stage(LayerRange layers, int64_t num_layers);

  // The first stage takes token ids [batch, tokens]; the others the previous
  // stage's output. The last stage returns logits [batch, tokens, vocab], the
  // others hidden states [batch, tokens, hidden]. Throws c10::Error when
  // given a tensor the model cannot take.
  virtual at::Tensor Forward(const at::Tensor& input) = 0;

  // The last stage's training loss of Forward(input) against `batch`: the
  // micro-batch's share of the mean loss of a mini-batch of `normaliser`
  // samples (loss.h), so that the micro-batches' losses add up to it.
  // FAILED_PRECONDITION on another stage.
  absl::StatusOr<at::Tensor> Loss(const at::Tensor& input,
                                  const MicroBatch& batch, double normaliser);

  LayerRange layers() const { return layers_; }
  bool is_first() const { return layers_.begin == 0; }
  bool is_last() const { return layers_.end == num_layers_; }

  // The first stage's table of token embeddings when the model has one
  // whose gradient is nonzero only in the rows of the tokens seen (which
  // the gradient sync then sends alone); undefined otherwise.
  virtual at::Tensor token_table() const { return {}; }
  // With embeddings tied to the head, the embedding's weight on the first
  // and on the last stage, each holding a copy that the runtime keeps equal
  // (tied_embedding_sync.h); undefined otherwise.
  virtual at::Tensor tied_weight() const { return {}; }

 protected:
  // Loss on the last stage.
  virtual absl::StatusOr<at::Tensor> LastStageLoss(const at::Tensor& input,
                                                   const MicroBatch& batch,
                                                   double normaliser) = 0;

 private:
  const LayerRange layers_;
  const int64_t num_layers_;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_MODEL_STAGE_H_
