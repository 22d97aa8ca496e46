// A user's own model as TorchScript, one file per piece, in a directory that
// scripts/export-torchscript writes:
//
//   embedding.pt   forward(tokens) -> hidden states: token ids, int64
//                  [batch, tokens], to [batch, tokens, hidden]
//   block-0.pt ... block-<N-1>.pt
//                  forward(x) -> a tensor of x's shape: the N blocks a
//                  pipeline divides among its stages
//   head.pt        forward(x) -> logits [batch, tokens, vocab]
//   loss.pt        forward(logits, targets) -> a scalar: the loss summed over
//                  the tokens (targets are int64 [batch, tokens]). A pipeline
//                  divides it by the whole batch's token count, so that its
//                  micro-batches add up to the batch's mean exactly.
//
// Loading checks every piece against that contract on a probe batch (one
// sample of seq_length token ids 0) before anything trains, and refuses,
// naming the file, a piece that is no TorchScript archive, fails on the
// probe, returns a tensor of another rank or shape, or, but for the loss,
// holds no parameters. The parameters take the job's dtype.
//
//   ASSIGN_OR_RETURN(Directory modules, data_root.Open("my-model", false));
//   ASSIGN_OR_RETURN(ScriptedModules model,
//                    LoadScriptedModules(modules, {.seq_length = 128}));
//   model.blocks.size();  // N
#ifndef CHIMERA_WORKER_MODEL_SCRIPTED_MODULES_H_
#define CHIMERA_WORKER_MODEL_SCRIPTED_MODULES_H_

#include <c10/core/ScalarType.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/directory.h"
#include "worker/model/model_config.h"

namespace chimera::worker {

struct ScriptedModules {
  torch::jit::Module embedding;
  std::vector<torch::jit::Module> blocks;
  torch::jit::Module head;
  torch::jit::Module loss;
  // The width of the hidden states and the logits, as the probe found them.
  int64_t hidden_size = 0;
  int64_t vocab_size = 0;
};

struct ScriptedProbe {
  // Tokens of the probe batch's one sample, > 0.
  int64_t seq_length = 0;
  // The dtype every parameter is converted to, and the hidden states and
  // logits must have.
  c10::ScalarType dtype = c10::ScalarType::Float;
};

// The pieces in `modules`, checked on `probe`'s batch, in training mode.
// INVALID_ARGUMENT naming the file for a piece that breaks the contract, a
// file of another name ending in .pt, or blocks not numbered 0..N-1; NOT_FOUND
// naming a missing piece.
absl::StatusOr<ScriptedModules> LoadScriptedModules(const Directory& modules,
                                                    const ScriptedProbe& probe);

// The pieces in `modules` for a job's model `config`: loaded on a probe of
// its seq_length tokens in its dtype, and with the sizes it declares (and
// was planned with): num_layers blocks, hidden states of hidden_size and
// logits over vocab_size. Errors as LoadScriptedModules, or
// INVALID_ARGUMENT naming the size the pieces do not have.
absl::StatusOr<ScriptedModules> LoadScriptedModulesFor(
    const Directory& modules, const ModelConfig& config);

// The loss per token of a mini-batch of `samples` samples that `logits`
// [batch, tokens, vocab] and `targets` [batch, tokens] are part of: the
// scripted `loss` (their tokens' sum) over samples × tokens, so that the
// parts' losses add up to the mini-batch's mean. Throws c10::Error where the
// scripted code does.
at::Tensor MeanTokenLoss(torch::jit::Module& loss, const at::Tensor& logits,
                         const at::Tensor& targets, double samples);

// A torch::nn::Module that holds `piece`'s parameters under the piece's own
// names ("norm.weight"), submodule by submodule: the same tensors, so that
// what an optimizer writes into them is what the scripted code computes with.
std::shared_ptr<torch::nn::Module> ParameterMirror(
    const torch::jit::Module& piece);

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_MODEL_SCRIPTED_MODULES_H_
