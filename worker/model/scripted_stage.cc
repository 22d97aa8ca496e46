#include "worker/model/scripted_stage.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"

namespace chimera::worker {

ScriptedStage::ScriptedStage(const ScriptedModules& model, LayerRange layers)
    : Stage(layers, static_cast<int64_t>(model.blocks.size())) {
  if (is_first()) {
    embedding_ = model.embedding;
    register_module("embedding", ParameterMirror(*embedding_));
  }
  // "blocks.<i>": the names torch.nn.ModuleDict(pieces) gives the model's
  // parameters in PyTorch, whatever blocks this stage holds.
  auto blocks =
      register_module("blocks", std::make_shared<torch::nn::Module>());
  for (int64_t i = layers.begin; i < layers.end; ++i) {
    blocks_.push_back(model.blocks[i]);
    blocks->register_module(absl::StrCat(i), ParameterMirror(blocks_.back()));
  }
  if (is_last()) {
    head_ = model.head;
    loss_ = model.loss;
    register_module("head", ParameterMirror(*head_));
  }
}

void ScriptedStage::MovePiecesTo(c10::Device device) {
  // The pieces' own: their buffers (a mask, a rotary table) move with their
  // parameters, which keep their identity (the mirror's tensors move too).
  for (std::optional<torch::jit::Module>* piece :
       {&embedding_, &head_, &loss_}) {
    if (*piece) (*piece)->to(device);
  }
  for (torch::jit::Module& block : blocks_) block.to(device);
}

at::Tensor ScriptedStage::Hidden(const at::Tensor& input) {
  at::Tensor hidden =
      embedding_ ? embedding_->forward({input}).toTensor() : input;
  for (torch::jit::Module& block : blocks_) {
    hidden = block.forward({hidden}).toTensor();
  }
  return hidden;
}

at::Tensor ScriptedStage::Forward(const at::Tensor& input) {
  const at::Tensor hidden = Hidden(input);
  return head_ ? head_->forward({hidden}).toTensor() : hidden;
}

absl::StatusOr<at::Tensor> ScriptedStage::LastStageLoss(const at::Tensor& input,
                                                        const MicroBatch& batch,
                                                        double normaliser) {
  return MeanTokenLoss(*loss_, Forward(input), batch.targets, normaliser);
}

absl::StatusOr<std::shared_ptr<ScriptedStage>> BuildScriptedStage(
    const ScriptedModules& model, LayerRange layers, c10::Device device) {
  const auto blocks = static_cast<int64_t>(model.blocks.size());
  if (layers.begin < 0 || layers.begin >= layers.end || layers.end > blocks) {
    return absl::InvalidArgumentError(
        absl::StrCat("blocks [", layers.begin, ", ", layers.end,
                     ") do not lie within the model's ", blocks));
  }
  auto stage = std::make_shared<ScriptedStage>(model, layers);
  if (!device.is_cpu()) stage->MovePiecesTo(device);
  return stage;
}

}  // namespace chimera::worker
