#include "worker/model/split_backward.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/unit/worker/test_models.h"
#include "worker/model/loss.h"
#include "worker/model/micro_batch.h"
#include "worker/model/transformer_stage.h"
#include "worker/runtime/memory_tracker.h"

namespace chimera::worker {
namespace {

using testing::RandomTokens;
using testing::TinyConfig;

constexpr uint64_t kSeed = 7;

std::shared_ptr<TransformerStage> Build(LayerRange layers) {
  return BuildTransformerStage(TinyConfig(ModelFamily::kGpt), layers, kSeed)
      .value();
}

// A middle stage's input activation and output gradient for `batch`
// samples, from a fixed seed.
at::Tensor RandomActivation(int64_t batch, uint64_t seed) {
  const ModelConfig config = TinyConfig(ModelFamily::kGpt);
  at::Generator generator = at::detail::createCPUGenerator(seed);
  return at::randn({batch, config.seq_length, config.hidden_size}, generator,
                   at::TensorOptions().dtype(config.dtype));
}

// Parameter name -> its .grad (undefined when none has accumulated).
std::map<std::string, at::Tensor> Gradients(const Stage& stage) {
  std::map<std::string, at::Tensor> gradients;
  for (const auto& item : stage.named_parameters()) {
    gradients[item.key()] = item.value().grad();
  }
  return gradients;
}

void ClearGradients(Stage& stage) {
  for (at::Tensor& parameter : stage.parameters()) {
    parameter.mutable_grad().reset();
  }
}

// The split backward runs the same kernels on the same values as the fused
// one, so the gradients agree to the last bit.
void ExpectIdentical(const std::map<std::string, at::Tensor>& expected,
                     const std::map<std::string, at::Tensor>& actual) {
  ASSERT_EQ(expected.size(), actual.size());
  for (const auto& [name, gradient] : expected) {
    ASSERT_TRUE(gradient.defined()) << name;
    ASSERT_TRUE(actual.at(name).defined()) << name << " has no gradient";
    EXPECT_TRUE(at::equal(gradient, actual.at(name))) << name;
  }
}

struct MiddleStageRun {
  at::Tensor input;
  at::Tensor output;
};

MiddleStageRun ForwardMiddle(Stage& stage, const at::Tensor& activation) {
  at::Tensor input = activation.detach().requires_grad_(true);
  at::Tensor output = stage.Forward(input);
  return {input, output};
}

TEST(SplitBackwardTest, InputThenWeightGradientsEqualTheFusedBackward) {
  const std::shared_ptr<TransformerStage> stage = Build({1, 3});
  const at::Tensor activation = RandomActivation(3, 1);
  const at::Tensor output_gradient = RandomActivation(3, 2);

  MiddleStageRun fused = ForwardMiddle(*stage, activation);
  fused.output.backward(output_gradient);
  const std::map<std::string, at::Tensor> expected = Gradients(*stage);
  ClearGradients(*stage);

  MiddleStageRun split = ForwardMiddle(*stage, activation);
  SplitGradient gradient =
      ComputeInputGradient(split.output, output_gradient, split.input);
  ASSERT_TRUE(gradient.input_gradient.defined());
  EXPECT_TRUE(at::equal(gradient.input_gradient, fused.input.grad()));
  EXPECT_FALSE(split.input.grad().defined())
      << "the input gradient is returned, not accumulated";
  for (const auto& [name, weight_gradient] : Gradients(*stage)) {
    EXPECT_FALSE(weight_gradient.defined())
        << name << " got a gradient before ComputeWeightGradients";
  }
  ComputeWeightGradients(std::move(gradient.weight_roots));
  ExpectIdentical(expected, Gradients(*stage));
}

TEST(SplitBackwardTest, TheLastStagesLossIsBackpropagatedFromOne) {
  const ModelConfig config = TinyConfig(ModelFamily::kGpt);
  const std::shared_ptr<TransformerStage> stage = Build({2, 4});
  const MicroBatch batch =
      MakeMicroBatch(config, RandomTokens(config, 2), {kSeed, 0, 0}).value();
  const at::Tensor activation = RandomActivation(2, 3);
  const auto loss_of = [&](const MiddleStageRun& run) {
    return LanguageModelLoss(run.output, batch, 2.0).value();
  };

  const MiddleStageRun fused = ForwardMiddle(*stage, activation);
  loss_of(fused).backward();
  const std::map<std::string, at::Tensor> expected = Gradients(*stage);
  ClearGradients(*stage);

  const MiddleStageRun split = ForwardMiddle(*stage, activation);
  SplitGradient gradient =
      ComputeInputGradient(loss_of(split), at::Tensor(), split.input);
  EXPECT_TRUE(at::equal(gradient.input_gradient, fused.input.grad()));
  ComputeWeightGradients(std::move(gradient.weight_roots));
  ExpectIdentical(expected, Gradients(*stage));
}

TEST(SplitBackwardTest, TokenInputsLeaveTheWholeBackwardToTheWeights) {
  const ModelConfig config = TinyConfig(ModelFamily::kGpt);
  const std::shared_ptr<TransformerStage> stage = Build({0, 2});
  const at::Tensor tokens =
      RandomTokens(config, 2).slice(1, 0, config.seq_length);
  const at::Tensor output_gradient = RandomActivation(2, 4);

  stage->Forward(tokens).backward(output_gradient);
  const std::map<std::string, at::Tensor> expected = Gradients(*stage);
  ClearGradients(*stage);

  SplitGradient gradient =
      ComputeInputGradient(stage->Forward(tokens), output_gradient, tokens);
  EXPECT_FALSE(gradient.input_gradient.defined());
  for (const auto& [name, weight_gradient] : Gradients(*stage)) {
    EXPECT_FALSE(weight_gradient.defined()) << name;
  }
  ComputeWeightGradients(std::move(gradient.weight_roots));
  ExpectIdentical(expected, Gradients(*stage));
}

TEST(SplitBackwardTest, WeightGradientsAccumulateAcrossMicroBatchesInAnyOrder) {
  const std::shared_ptr<TransformerStage> stage = Build({1, 3});
  const std::vector<at::Tensor> activations = {RandomActivation(2, 5),
                                               RandomActivation(2, 6)};
  const std::vector<at::Tensor> output_gradients = {RandomActivation(2, 7),
                                                    RandomActivation(2, 8)};
  for (int mb = 0; mb < 2; ++mb) {
    ForwardMiddle(*stage, activations[mb])
        .output.backward(output_gradients[mb]);
  }
  const std::map<std::string, at::Tensor> expected = Gradients(*stage);
  ClearGradients(*stage);

  // Both input gradients first, as a zero-bubble schedule defers the
  // weights.
  std::vector<SplitGradient> pending;
  for (int mb = 0; mb < 2; ++mb) {
    const MiddleStageRun run = ForwardMiddle(*stage, activations[mb]);
    pending.push_back(
        ComputeInputGradient(run.output, output_gradients[mb], run.input));
  }
  // W1 before W0: two summands add up the same either way.
  ComputeWeightGradients(std::move(pending[1].weight_roots));
  ComputeWeightGradients(std::move(pending[0].weight_roots));
  ExpectIdentical(expected, Gradients(*stage));
}

TEST(SplitBackwardTest, HoldsLessAfterTheInputGradientAndNothingAfterWeights) {
  MemoryTracker& memory = MemoryTracker::Install();
  const std::shared_ptr<TransformerStage> stage = Build({1, 3});
  // Gradients in place beforehand, as the executor's buckets are, so that
  // the weights' gradients allocate nothing of their own.
  for (at::Tensor& parameter : stage->parameters()) {
    parameter.mutable_grad() = at::zeros_like(parameter);
  }
  const at::Tensor activation = RandomActivation(4, 9);
  const at::Tensor output_gradient = RandomActivation(4, 10);
  const int64_t before = memory.current_bytes();
  MiddleStageRun run = ForwardMiddle(*stage, activation);
  const int64_t graph_bytes = memory.current_bytes() - before;
  SplitGradient gradient =
      ComputeInputGradient(run.output, output_gradient, run.input);
  gradient.input_gradient.reset();
  run = {};
  const int64_t weight_side_bytes = memory.current_bytes() - before;
  EXPECT_GT(weight_side_bytes, 0);
  EXPECT_LT(weight_side_bytes, graph_bytes)
      << "what only the input gradient needed is still held";
  ComputeWeightGradients(std::move(gradient.weight_roots));
  EXPECT_EQ(memory.current_bytes(), before);
}

}  // namespace
}  // namespace chimera::worker
