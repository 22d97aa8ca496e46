// One pipeline stage of a TorchScript model (scripted_modules.h): its blocks
// [begin, end), plus the embedding on the first stage and the head and the
// loss on the last. It holds the parameters of its part of the model under
// global names, "embedding.<name>", "blocks.<i>.<name>" with i the block's
// index in the whole model, and "head.<name>" (<name> the piece's own, e.g.
// "norm.weight"): the names PyTorch gives them in a torch.nn.ModuleDict of
// the pieces. So the stages of any partition hold exactly the whole model's
// parameters, and exported weights load into the user's modules. They are the
// pieces' own tensors: what an optimizer or a checkpoint writes into them is
// what the scripted code computes with.
//
//   ASSIGN_OR_RETURN(ScriptedModules model, LoadScriptedModules(dir, probe));
//   ASSIGN_OR_RETURN(std::shared_ptr<ScriptedStage> last,
//                    BuildScriptedStage(model, LayerRange{2, 4}));
//   ASSIGN_OR_RETURN(at::Tensor loss, last->Loss(hidden, batch, samples));
#ifndef CHIMERA_WORKER_MODEL_SCRIPTED_STAGE_H_
#define CHIMERA_WORKER_MODEL_SCRIPTED_STAGE_H_

#include <c10/core/Device.h>
#include <torch/nn/module.h>

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/model/micro_batch.h"
#include "worker/model/model_config.h"
#include "worker/model/scripted_modules.h"
#include "worker/model/stage.h"

namespace chimera::worker {

class ScriptedStage : public Stage {
 public:
  // `model`'s pieces that `layers` (valid for its blocks) needs. They are
  // shared with `model`, not copied: stages built from one model must not
  // overlap.
  ScriptedStage(const ScriptedModules& model, LayerRange layers);

  // The first stage takes token ids [batch, tokens]; the others the previous
  // stage's output. The last stage returns logits, the others hidden states.
  // Throws c10::Error where the scripted code does.
  at::Tensor Forward(const at::Tensor& input) override;

  // Moves this stage's pieces, parameters and buffers, to `device`.
  void MovePiecesTo(c10::Device device);

 private:
  // The scripted loss of Forward(input) and batch.targets (summed over the
  // tokens) divided by the mini-batch's tokens, normaliser × the tokens of a
  // sample: the mean loss per token, as our own families'.
  absl::StatusOr<at::Tensor> LastStageLoss(const at::Tensor& input,
                                           const MicroBatch& batch,
                                           double normaliser) override;
  // The embedding (first stage) and the blocks: everything but the head.
  at::Tensor Hidden(const at::Tensor& input);

  std::optional<torch::jit::Module> embedding_;
  std::vector<torch::jit::Module> blocks_;
  std::optional<torch::jit::Module> head_;
  std::optional<torch::jit::Module> loss_;
};

// The stage of `layers` of `model`, on `device`. INVALID_ARGUMENT when the
// range does not lie within the model's blocks.
absl::StatusOr<std::shared_ptr<ScriptedStage>> BuildScriptedStage(
    const ScriptedModules& model, LayerRange layers,
    c10::Device device = c10::Device(c10::DeviceType::CPU));

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_MODEL_SCRIPTED_STAGE_H_
