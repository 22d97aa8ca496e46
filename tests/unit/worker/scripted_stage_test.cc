#include "worker/model/scripted_stage.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "common/directory.h"
#include "tests/support/scripted_model_files.h"
#include "tests/support/temp_dir.h"

namespace chimera::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kTokens = 5;
// The whole mini-batch's samples, whose tokens a loss is divided by.
constexpr double kNormaliser = 4;

class ScriptedStageTest : public chimera::testing::ScriptedModelSuite {
 protected:
  // The test model, loaded afresh: stages of one load share its pieces.
  static ScriptedModules Load() {
    absl::StatusOr<ScriptedModules> model = LoadScriptedModules(
        ModelDirectory(), {.seq_length = kTokens, .dtype = at::kDouble});
    EXPECT_TRUE(model.ok()) << model.status();
    return *std::move(model);
  }

  static std::shared_ptr<ScriptedStage> Build(const ScriptedModules& model,
                                              LayerRange layers) {
    absl::StatusOr<std::shared_ptr<ScriptedStage>> stage =
        BuildScriptedStage(model, layers);
    EXPECT_TRUE(stage.ok()) << stage.status();
    return *std::move(stage);
  }

  static MicroBatch Batch() {
    at::manual_seed(3);
    MicroBatch batch;
    batch.inputs = at::randint(16, {2, kTokens}, at::kLong);
    batch.targets = at::randint(16, {2, kTokens}, at::kLong);
    return batch;
  }
};

std::map<std::string, at::Tensor> Gradients(const torch::nn::Module& stage) {
  std::map<std::string, at::Tensor> gradients;
  for (const auto& item : stage.named_parameters()) {
    gradients[item.key()] = item.value().grad();
  }
  return gradients;
}

TEST_F(ScriptedStageTest, ParametersHaveGlobalNamesAcrossAnyPartition) {
  const ScriptedModules model = Load();
  std::vector<std::string> first;
  for (const auto& item : Build(model, {0, 1})->named_parameters()) {
    first.push_back(item.key());
  }
  EXPECT_THAT(first, ElementsAre("embedding.tokens.weight",
                                 "blocks.0.norm.weight", "blocks.0.norm.bias",
                                 "blocks.0.mlp.weight", "blocks.0.mlp.bias"));
  std::vector<std::string> last;
  for (const auto& item : Build(model, {1, 3})->named_parameters()) {
    last.push_back(item.key());
  }
  EXPECT_THAT(last, ElementsAre("blocks.1.norm.weight", "blocks.1.norm.bias",
                                "blocks.1.mlp.weight", "blocks.1.mlp.bias",
                                "blocks.2.norm.weight", "blocks.2.norm.bias",
                                "blocks.2.mlp.weight", "blocks.2.mlp.bias",
                                "head.out.weight", "head.out.bias"));
}

TEST_F(ScriptedStageTest, ParametersAreThePiecesOwnTensors) {
  const ScriptedModules model = Load();
  const std::shared_ptr<ScriptedStage> stage = Build(model, {0, 3});
  const at::Tensor weight =
      model.head.attr("out").toModule().attr("weight").toTensor();
  EXPECT_EQ(stage->named_parameters()["head.out.weight"].data_ptr(),
            weight.data_ptr());
  // What an optimizer writes in place is what the head computes with.
  {
    at::NoGradGuard no_grad;
    stage->named_parameters()["head.out.weight"].zero_();
  }
  const at::Tensor logits = stage->Forward(Batch().inputs);
  const at::Tensor bias = stage->named_parameters()["head.out.bias"];
  EXPECT_TRUE(at::equal(logits, bias.expand_as(logits)));
}

TEST_F(ScriptedStageTest, TwoStagesComputeTheWholeModelsLossAndGradients) {
  const MicroBatch batch = Batch();
  const ScriptedModules whole_model = Load();
  const std::shared_ptr<ScriptedStage> whole = Build(whole_model, {0, 3});
  absl::StatusOr<at::Tensor> whole_loss =
      whole->Loss(batch.inputs, batch, kNormaliser);
  ASSERT_TRUE(whole_loss.ok()) << whole_loss.status();
  whole_loss->backward();

  const ScriptedModules split_model = Load();
  const std::shared_ptr<ScriptedStage> first = Build(split_model, {0, 1});
  const std::shared_ptr<ScriptedStage> last = Build(split_model, {1, 3});
  const at::Tensor hidden = first->Forward(batch.inputs);
  const at::Tensor received = hidden.detach().requires_grad_();
  absl::StatusOr<at::Tensor> split_loss =
      last->Loss(received, batch, kNormaliser);
  ASSERT_TRUE(split_loss.ok()) << split_loss.status();
  split_loss->backward();
  hidden.backward(received.grad());

  EXPECT_EQ(split_loss->item<double>(), whole_loss->item<double>());
  std::map<std::string, at::Tensor> split = Gradients(*first);
  split.merge(Gradients(*last));
  const std::map<std::string, at::Tensor> expected = Gradients(*whole);
  ASSERT_EQ(split.size(), expected.size());
  for (const auto& [name, gradient] : expected) {
    ASSERT_TRUE(split.at(name).defined()) << name;
    EXPECT_TRUE(at::allclose(split.at(name), gradient, 1e-12, 1e-14)) << name;
  }
}

TEST_F(ScriptedStageTest, TheLossIsTheScriptedSumOverTheMiniBatchsTokens) {
  const MicroBatch batch = Batch();
  const std::shared_ptr<ScriptedStage> stage = Build(Load(), {0, 3});
  // A mini-batch of 4 samples of kTokens each.
  absl::StatusOr<at::Tensor> loss = stage->Loss(batch.inputs, batch, 4);
  ASSERT_TRUE(loss.ok()) << loss.status();
  const at::Tensor logits = stage->Forward(batch.inputs);
  const at::Tensor summed = at::cross_entropy_loss(
      logits.flatten(0, 1), batch.targets.flatten(), {}, at::Reduction::Sum);
  EXPECT_NEAR(loss->item<double>(), summed.item<double>() / (4 * kTokens),
              1e-15);
}

TEST_F(ScriptedStageTest, OnlyTheLastStageHasALossAndRangesStayWithinTheModel) {
  const ScriptedModules model = Load();
  const MicroBatch batch = Batch();
  const absl::Status not_last =
      Build(model, {0, 2})->Loss(batch.inputs, batch, 1).status();
  EXPECT_EQ(not_last.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(not_last.message()),
              HasSubstr("this stage ends at block 2 of 3"));
  const absl::Status outside = BuildScriptedStage(model, {2, 4}).status();
  EXPECT_EQ(outside.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(outside.message()),
              HasSubstr("blocks [2, 4) do not lie within the model's 3"));
}

}  // namespace
}  // namespace chimera::worker
