// The split backward of the zero-bubble schedules on one stage's autograd
// graph. ComputeInputGradient computes only the gradient w.r.t. the stage
// input (what the previous stage waits for) and keeps what the weights'
// gradients need; ComputeWeightGradients, later, accumulates those into the
// parameters' .grad. Together they give what one end.backward(gradient)
// gives, and the weights' part runs none of the input gradient's work again.
//
//   at::Tensor input = activation.detach().requires_grad_(true);
//   at::Tensor output = stage->Forward(input);
//   SplitGradient split = ComputeInputGradient(output, output_gradient, input);
//   Send(split.input_gradient);
//   ...
//   ComputeWeightGradients(std::move(split.weight_roots));
//
// How: the graph's nodes fall in two sides. The input side are the nodes the
// input gradient flows through (each depends on the input); the weight side
// are the nodes that lead only to parameters. ComputeInputGradient runs the
// autograd engine from the end to the input alone, so the input side's nodes
// skip their weight outputs (autograd's output mask), and it captures the
// gradient flowing into every input-side node that has an edge into the
// weight side (a linear's addmm, a layer norm): the weight roots. It then
// cuts those nodes' edges into the input side, so that nothing later runs
// the input side again, and releases what the rest of the input side saved
// for the input gradient alone (GELU inputs, attention probabilities...).
// What the weight roots saved (the linears' inputs) stays until
// ComputeWeightGradients runs the engine from them.
#ifndef CHIMERA_WORKER_MODEL_SPLIT_BACKWARD_H_
#define CHIMERA_WORKER_MODEL_SPLIT_BACKWARD_H_

#include <ATen/core/Tensor.h>
#include <torch/csrc/autograd/edge.h>

#include <vector>

namespace chimera::worker {

// Where the weights' gradients of a graph start, and the gradient flowing
// into each. Holds that part of the graph (and its saved tensors) alive.
struct WeightGradientRoots {
  std::vector<torch::autograd::Edge> roots;
  std::vector<at::Tensor> gradients;
};

struct SplitGradient {
  // d end / d input; undefined when the input takes no gradient (token ids).
  at::Tensor input_gradient;
  WeightGradientRoots weight_roots;
};

// The first half of end.backward(end_gradient): the input gradient, without
// touching any .grad. `input` is the stage input: a leaf of the graph that
// requires grad, or a tensor that requires none (token ids), and then nothing
// runs here and everything is left to ComputeWeightGradients. An undefined
// `end_gradient` stands for 1, as in Tensor::backward, for a scalar loss.
// The graph must not be used for anything else afterwards (its input-side
// edges are cut). Throws c10::Error, as autograd does.
SplitGradient ComputeInputGradient(const at::Tensor& end,
                                   const at::Tensor& end_gradient,
                                   const at::Tensor& input);

// The second half: accumulates the weights' gradients into their .grad and
// frees the rest of the graph. Throws c10::Error, as autograd does.
void ComputeWeightGradients(WeightGradientRoots weight_roots);

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_MODEL_SPLIT_BACKWARD_H_
