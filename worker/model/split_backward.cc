#include "worker/model/split_backward.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>

#include <memory>
#include <unordered_set>
#include <utility>

namespace chimera::worker {
namespace {

using torch::autograd::Edge;
using torch::autograd::edge_list;
using torch::autograd::Engine;
using torch::autograd::Node;

// The input side of the graph below `root`: every node from which `target`
// (the input's gradient accumulator) can be reached, children before their
// parents. Iterative, since a stage's graph is thousands of nodes deep.
std::vector<std::shared_ptr<Node>> InputSide(
    const std::shared_ptr<Node>& root, const Node* target,
    std::unordered_set<const Node*>& members) {
  struct Frame {
    std::shared_ptr<Node> node;
    size_t next_edge = 0;
  };
  std::vector<std::shared_ptr<Node>> input_side;
  std::unordered_set<const Node*> entered = {root.get()};
  std::vector<Frame> stack = {{root}};
  while (!stack.empty()) {
    Frame& frame = stack.back();
    if (frame.next_edge < frame.node->num_outputs()) {
      const Edge& edge = frame.node->next_edge(frame.next_edge++);
      if (edge.is_valid() && entered.insert(edge.function.get()).second) {
        stack.push_back({edge.function});
      }
      continue;
    }
    // A DAG: every child has been finished before its parent.
    bool reaches_target = frame.node.get() == target;
    for (const Edge& edge : frame.node->next_edges()) {
      reaches_target |= edge.is_valid() && members.count(edge.function.get());
    }
    if (reaches_target) {
      members.insert(frame.node.get());
      input_side.push_back(std::move(frame.node));
    }
    stack.pop_back();
  }
  return input_side;
}

bool HasEdgeOutside(const Node& node,
                    const std::unordered_set<const Node*>& side) {
  for (const Edge& edge : node.next_edges()) {
    if (edge.is_valid() && side.count(edge.function.get()) == 0) return true;
  }
  return false;
}

}  // namespace

SplitGradient ComputeInputGradient(const at::Tensor& end,
                                   const at::Tensor& end_gradient,
                                   const at::Tensor& input) {
  const Edge end_edge = torch::autograd::impl::gradient_edge(end);
  TORCH_CHECK(end_edge.is_valid(), "the graph's end requires no gradient");
  const at::Tensor gradient =
      end_gradient.defined() ? end_gradient : at::ones_like(end);
  SplitGradient split;
  if (!input.requires_grad()) {
    split.weight_roots = {{end_edge}, {gradient}};
    return split;
  }
  // A non-leaf input's own graph would count as weight side.
  TORCH_CHECK(input.is_leaf(), "the stage input must be a leaf of the graph");
  const Edge input_edge = torch::autograd::impl::gradient_edge(input);
  std::unordered_set<const Node*> input_side_members;
  const std::vector<std::shared_ptr<Node>> input_side = InputSide(
      end_edge.function, input_edge.function.get(), input_side_members);
  TORCH_CHECK(input_side_members.count(end_edge.function.get()) != 0,
              "the graph's end does not depend on the stage input");

  // Captured by the engine: the input gradient, then the gradient flowing
  // into each input of every node where weight gradients branch off.
  edge_list captures = {input_edge};
  for (const std::shared_ptr<Node>& node : input_side) {
    if (!HasEdgeOutside(*node, input_side_members)) continue;
    for (uint32_t i = 0; i < node->num_inputs(); ++i) {
      captures.emplace_back(node, i);
    }
  }
  const std::vector<at::Tensor> captured = Engine::get_default_engine().execute(
      {end_edge}, {gradient}, /*keep_graph=*/true, /*create_graph=*/false,
      /*accumulate_grad=*/false, captures);
  split.input_gradient = captured[0];
  for (size_t i = 1; i < captures.size(); ++i) {
    // An input of a multi-output op that nothing used gets no gradient.
    if (!captured[i].defined()) continue;
    split.weight_roots.roots.push_back(captures[i]);
    split.weight_roots.gradients.push_back(captured[i]);
  }
  // The branches now compute their weight outputs only, and the rest of the
  // input side is never run again: what only it saved is freed now.
  for (const std::shared_ptr<Node>& node : input_side) {
    if (!HasEdgeOutside(*node, input_side_members)) {
      node->release_variables();
      continue;
    }
    for (Edge& edge : node->next_edges()) {
      if (input_side_members.count(edge.function.get()) != 0) edge = Edge();
    }
  }
  return split;
}

void ComputeWeightGradients(WeightGradientRoots weight_roots) {
  if (weight_roots.roots.empty()) return;
  Engine::get_default_engine().execute(
      weight_roots.roots, weight_roots.gradients, /*keep_graph=*/false,
      /*create_graph=*/false, /*accumulate_grad=*/true);
}

}  // namespace chimera::worker
