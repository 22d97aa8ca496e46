#include "worker/model/transformer_stage.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/unit/worker/test_models.h"
#include "worker/model/loss.h"
#include "worker/model/micro_batch.h"

namespace chimera::worker {
namespace {

using ::testing::HasSubstr;
using testing::RandomTokens;
using testing::TinyConfig;

constexpr double kTolerance = 1e-12;
constexpr uint64_t kSeed = 42;

std::shared_ptr<TransformerStage> Build(const ModelConfig& config,
                                        LayerRange layers,
                                        uint64_t seed = kSeed) {
  absl::StatusOr<std::shared_ptr<TransformerStage>> stage =
      BuildTransformerStage(config, layers, seed);
  EXPECT_TRUE(stage.ok()) << stage.status();
  return *stage;
}

// Parameter name -> gradient (or value) of every stage given.
std::map<std::string, at::Tensor> Named(
    const std::vector<std::shared_ptr<TransformerStage>>& stages,
    bool gradients) {
  std::map<std::string, at::Tensor> named;
  for (const auto& stage : stages) {
    for (const auto& item : stage->named_parameters()) {
      named[item.key()] = gradients ? item.value().grad() : item.value();
    }
  }
  return named;
}

void ExpectSameTensors(const std::map<std::string, at::Tensor>& expected,
                       const std::map<std::string, at::Tensor>& actual,
                       double tolerance) {
  ASSERT_EQ(expected.size(), actual.size());
  for (const auto& [name, tensor] : expected) {
    const auto it = actual.find(name);
    ASSERT_NE(it, actual.end()) << "missing " << name;
    ASSERT_TRUE(tensor.defined() && it->second.defined()) << name;
    EXPECT_LE((tensor - it->second).abs().max().item<double>(), tolerance)
        << name;
  }
}

// The loss of `first` then `last` run the way a pipeline runs them (the
// activation detached between them, its gradient handed back), after
// backpropagating it through both.
absl::StatusOr<at::Tensor> TwoStageLoss(Stage& first, Stage& last,
                                        const MicroBatch& batch) {
  const at::Tensor sent = first.Forward(batch.inputs);
  const at::Tensor received = sent.detach().requires_grad_(true);
  absl::StatusOr<at::Tensor> loss =
      LanguageModelLoss(last.Forward(received), batch, 3);
  if (!loss.ok()) return loss;
  loss->backward();
  sent.backward(received.grad());
  return loss;
}

class StageCompositionTest : public ::testing::TestWithParam<ModelFamily> {};

// Runs the full model and the two stages [0, split) and [split, L) the way a
// pipeline does (activation detached between them, its gradient handed back),
// and compares loss and every parameter's gradient.
TEST_P(StageCompositionTest, TwoStagesMatchFullModelLossAndGradients) {
  const ModelConfig config = TinyConfig(GetParam());
  const absl::StatusOr<MicroBatch> batch =
      MakeMicroBatch(config, RandomTokens(config, 3), SampleKey{kSeed, 0, 0});
  ASSERT_TRUE(batch.ok()) << batch.status();

  const auto full = Build(config, {0, config.num_layers});
  const absl::StatusOr<at::Tensor> full_loss =
      LanguageModelLoss(full->Forward(batch->inputs), *batch, 3);
  ASSERT_TRUE(full_loss.ok()) << full_loss.status();
  full_loss->backward();

  for (int64_t split = 1; split < config.num_layers; ++split) {
    SCOPED_TRACE(::testing::Message() << "split at layer " << split);
    const auto first = Build(config, {0, split});
    const auto last = Build(config, {split, config.num_layers});
    const absl::StatusOr<at::Tensor> loss = TwoStageLoss(*first, *last, *batch);
    ASSERT_TRUE(loss.ok()) << loss.status();

    EXPECT_NEAR(loss->item<double>(), full_loss->item<double>(), kTolerance);
    ExpectSameTensors(Named({full}, /*gradients=*/true),
                      Named({first, last}, /*gradients=*/true), kTolerance);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryFamily, StageCompositionTest,
                         ::testing::Values(ModelFamily::kGpt,
                                           ModelFamily::kBert,
                                           ModelFamily::kLlama),
                         [](const auto& info) {
                           return std::string(ModelFamilyName(info.param));
                         });

TEST(TransformerStageTest, ThreeStagesHoldExactlyTheFullModelsParameters) {
  const ModelConfig config = TinyConfig(ModelFamily::kGpt);
  ExpectSameTensors(Named({Build(config, {0, 4})}, /*gradients=*/false),
                    Named({Build(config, {0, 1}), Build(config, {1, 3}),
                           Build(config, {3, 4})},
                          /*gradients=*/false),
                    /*tolerance=*/0);
}

TEST(TransformerStageTest, SameRangeAndSeedBuildBitwiseIdenticalStages) {
  const ModelConfig config = TinyConfig(ModelFamily::kBert);
  const auto a = Named({Build(config, {1, 3})}, /*gradients=*/false);
  const auto b = Named({Build(config, {1, 3})}, /*gradients=*/false);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, tensor] : a) {
    EXPECT_TRUE(at::equal(tensor, b.at(name))) << name;
  }
}

TEST(TransformerStageTest, DifferentSeedsGiveDifferentWeights) {
  const ModelConfig config = TinyConfig(ModelFamily::kGpt);
  const auto a = Named({Build(config, {1, 2}, 1)}, /*gradients=*/false);
  const auto b = Named({Build(config, {1, 2}, 2)}, /*gradients=*/false);
  EXPECT_FALSE(at::equal(a.at("layer1.qkv_weight"), b.at("layer1.qkv_weight")));
  EXPECT_FALSE(
      at::equal(a.at("layer1.mlp_in_weight"), b.at("layer1.mlp_in_weight")));
}

TEST(TransformerStageTest, LayersOfOneModelAreInitialisedDifferently) {
  const auto named = Named({Build(TinyConfig(ModelFamily::kGpt), {0, 4})},
                           /*gradients=*/false);
  EXPECT_FALSE(
      at::equal(named.at("layer0.qkv_weight"), named.at("layer1.qkv_weight")));
}

TEST(TransformerStageTest, Float32WeightsAreTheFloat64WeightsRounded) {
  ModelConfig config = TinyConfig(ModelFamily::kGpt);
  const auto wide = Named({Build(config, {0, 2})}, /*gradients=*/false);
  config.dtype = at::kFloat;
  const auto narrow = Named({Build(config, {0, 2})}, /*gradients=*/false);
  for (const auto& [name, tensor] : wide) {
    EXPECT_EQ(narrow.at(name).scalar_type(), at::kFloat) << name;
    EXPECT_TRUE(at::equal(tensor.to(at::kFloat), narrow.at(name))) << name;
  }
}

TEST(TransformerStageTest, OnlyFirstAndLastStagesOwnEmbeddingAndHead) {
  const ModelConfig config = TinyConfig(ModelFamily::kGpt);
  const auto first = Build(config, {0, 2});
  const auto middle = Build(config, {2, 3});
  const auto last = Build(config, {3, 4});
  EXPECT_TRUE(first->is_first());
  EXPECT_FALSE(first->is_last());
  EXPECT_FALSE(middle->is_first() || middle->is_last());
  EXPECT_TRUE(last->is_last());
  EXPECT_TRUE(first->named_parameters().contains("embedding.token_weight"));
  EXPECT_FALSE(middle->named_parameters().contains("embedding.token_weight"));
  EXPECT_TRUE(last->named_parameters().contains("head.output_weight"));
}

TEST(TransformerStageTest, ForwardShapesFollowTheStagesPlace) {
  const ModelConfig config = TinyConfig(ModelFamily::kGpt);
  const at::Tensor ids = at::zeros({2, 5}, at::kLong);
  const at::Tensor hidden = Build(config, {0, 2})->Forward(ids);
  EXPECT_EQ(hidden.sizes(), (std::vector<int64_t>{2, 5, 16}));
  EXPECT_EQ(hidden.scalar_type(), at::kDouble);
  EXPECT_EQ(Build(config, {2, 4})->Forward(hidden).sizes(),
            (std::vector<int64_t>{2, 5, 29}));
}

// The loss a last stage trains with is the loss of its logits; only a last
// stage has one.
TEST(TransformerStageTest, TheLastStagesLossIsThatOfItsLogits) {
  const ModelConfig config = TinyConfig(ModelFamily::kBert);
  const MicroBatch batch =
      *MakeMicroBatch(config, RandomTokens(config, 3), SampleKey{1, 2, 0});
  const auto model = Build(config, {0, 4});
  const at::Tensor expected =
      *LanguageModelLoss(model->Forward(batch.inputs), batch, 5);
  const absl::StatusOr<at::Tensor> loss = model->Loss(batch.inputs, batch, 5);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(loss->item<double>(), expected.item<double>(), 1e-12);
  const auto not_last = Build(config, {0, 2})->Loss(batch.inputs, batch, 5);
  EXPECT_EQ(not_last.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(not_last.status().message(),
              HasSubstr("this stage ends at block 2"));
}

TEST(TransformerStageTest, DecodersAttentionIsCausalAndBertsIsNot) {
  for (const ModelFamily family :
       {ModelFamily::kGpt, ModelFamily::kBert, ModelFamily::kLlama}) {
    const ModelConfig config = TinyConfig(family);
    const auto model = Build(config, {0, config.num_layers});
    at::Tensor ids = at::zeros({1, 6}, at::kLong);
    const at::Tensor before = model->Forward(ids);
    ids[0][5] = 7;  // change only the last token
    const at::Tensor after = model->Forward(ids);
    const bool earlier_changed =
        !at::equal(before.slice(1, 0, 5), after.slice(1, 0, 5));
    EXPECT_EQ(earlier_changed, family == ModelFamily::kBert)
        << ModelFamilyName(family);
  }
}

// Rotary positions (none learned), RMSNorm gains alone, no biases; q, k and
// v fused, and gate and up.
TEST(TransformerStageTest, LlamaHasTheParametersOfItsLayout) {
  const ModelConfig config = TinyConfig(ModelFamily::kLlama);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& item : Build(config, {0, 1})->named_parameters()) {
    shapes[item.key()] = item.value().sizes().vec();
  }
  for (const auto& item : Build(config, {3, 4})->named_parameters()) {
    if (item.key().rfind("head.", 0) == 0) {
      shapes[item.key()] = item.value().sizes().vec();
    }
  }
  // hidden 16, 4 heads of 4, 2 key/value heads (width 8), FFN 40, vocab 29.
  const std::map<std::string, std::vector<int64_t>> expected = {
      {"embedding.token_weight", {29, 16}},
      {"layer0.attention_norm_weight", {16}},
      {"layer0.qkv_weight", {16 + 2 * 8, 16}},
      {"layer0.attention_out_weight", {16, 16}},
      {"layer0.mlp_norm_weight", {16}},
      {"layer0.gate_up_weight", {2 * 40, 16}},
      {"layer0.down_weight", {16, 40}},
      {"head.norm_weight", {16}},
      {"head.output_weight", {29, 16}},
  };
  EXPECT_EQ(shapes, expected);
}

// Tied embeddings: the head projects by the embedding's weight (and has no
// bias), and the last of several stages holds an equal copy of it under the
// embedding's name, without positions. The whole model's gradient of that
// weight is the two copies' gradients summed; every other gradient is the
// untied composition's.
class TiedEmbeddingTest : public ::testing::TestWithParam<ModelFamily> {};

TEST_P(TiedEmbeddingTest, CopiesGradientsSumToTheWholeModels) {
  ModelConfig config = TinyConfig(GetParam());
  config.tie_embeddings = true;
  const absl::StatusOr<MicroBatch> batch =
      MakeMicroBatch(config, RandomTokens(config, 3), SampleKey{kSeed, 0, 0});
  ASSERT_TRUE(batch.ok()) << batch.status();
  const auto full = Build(config, {0, config.num_layers});
  EXPECT_EQ(Named({full}, false).count("head.output_weight"), 0u);
  EXPECT_EQ(Named({full}, false).count("head.output_bias"), 0u);
  const absl::StatusOr<at::Tensor> full_loss =
      LanguageModelLoss(full->Forward(batch->inputs), *batch, 3);
  ASSERT_TRUE(full_loss.ok()) << full_loss.status();
  full_loss->backward();

  const auto first = Build(config, {0, 2});
  const auto last = Build(config, {2, config.num_layers});
  ASSERT_TRUE(last->tied_weight().defined());
  EXPECT_EQ(Named({last}, false).count("embedding.position_weight"), 0u);
  EXPECT_TRUE(at::equal(first->tied_weight(), last->tied_weight()));
  const absl::StatusOr<at::Tensor> loss = TwoStageLoss(*first, *last, *batch);
  ASSERT_TRUE(loss.ok()) << loss.status();

  std::map<std::string, at::Tensor> summed =
      Named({first, last}, /*gradients=*/true);
  summed["embedding.token_weight"] =
      first->tied_weight().grad() + last->tied_weight().grad();
  ExpectSameTensors(Named({full}, /*gradients=*/true), summed, kTolerance);
  // Both parts matter: the head's and the embedding's.
  EXPECT_GT(last->tied_weight().grad().abs().max().item<double>(), 0);
  EXPECT_GT(first->tied_weight().grad().abs().max().item<double>(), 0);
}

INSTANTIATE_TEST_SUITE_P(Decoders, TiedEmbeddingTest,
                         ::testing::Values(ModelFamily::kGpt,
                                           ModelFamily::kLlama),
                         [](const ::testing::TestParamInfo<ModelFamily>& info) {
                           return std::string(ModelFamilyName(info.param));
                         });

TEST(TransformerStageTest, BertDoesNotTieItsEmbeddings) {
  ModelConfig config = TinyConfig(ModelFamily::kBert);
  config.tie_embeddings = true;
  const absl::StatusOr<std::shared_ptr<TransformerStage>> stage =
      BuildTransformerStage(config, {0, 4}, kSeed);
  ASSERT_FALSE(stage.ok());
  EXPECT_THAT(stage.status().message(),
              HasSubstr("model.tie_embeddings is set for a bert model"));
}

// Grouped-query attention is multi-head attention whose query heads of one
// group see the same keys and values: a model with 4 key/value heads that
// repeat the 2 of another, each for its 2 query heads, computes the same.
TEST(TransformerStageTest,
     GroupedQueryAttentionSharesEachKeyValueHeadWithItsGroup) {
  const ModelConfig grouped = TinyConfig(ModelFamily::kLlama);
  ModelConfig multi_head = grouped;
  multi_head.num_kv_heads = grouped.num_heads;
  const auto grouped_model = Build(grouped, {0, 4});
  const auto multi_head_model = Build(multi_head, {0, 4});
  {
    at::NoGradGuard no_grad;
    const auto source = Named({grouped_model}, /*gradients=*/false);
    for (auto& item : multi_head_model->named_parameters()) {
      const at::Tensor& from = source.at(item.key());
      if (item.key().find("qkv_weight") == std::string::npos) {
        item.value().copy_(from);
        continue;
      }
      // Rows: 4 query heads of 4, then 2 key heads, then 2 value heads.
      const at::Tensor query = from.slice(0, 0, 16);
      const auto repeated = [&](int64_t begin) {
        return from.slice(0, begin, begin + 8)
            .view({2, 1, 4, 16})
            .expand({2, 2, 4, 16})
            .reshape({16, 16});
      };
      item.value().copy_(at::cat({query, repeated(16), repeated(24)}));
    }
  }
  const at::Tensor ids = RandomTokens(grouped, 2).slice(1, 0, 9);
  EXPECT_TRUE(at::allclose(grouped_model->Forward(ids),
                           multi_head_model->Forward(ids), 0, kTolerance));
}

TEST(TransformerStageTest, BuildRejectsEmptyOrOutOfRangeLayers) {
  const ModelConfig config = TinyConfig(ModelFamily::kGpt);
  for (const LayerRange range :
       {LayerRange{2, 2}, LayerRange{-1, 2}, LayerRange{3, 5}}) {
    const auto stage = BuildTransformerStage(config, range, kSeed);
    EXPECT_EQ(stage.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(stage.status().message(), HasSubstr("within [0, 4)"));
  }
}

}  // namespace
}  // namespace chimera::worker
