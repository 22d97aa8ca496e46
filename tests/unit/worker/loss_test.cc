#include "worker/model/loss.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tests/unit/worker/test_models.h"
#include "worker/model/micro_batch.h"
#include "worker/model/stage.h"

namespace chimera::worker {
namespace {

using ::testing::HasSubstr;
using testing::RandomTokens;
using testing::TinyConfig;

constexpr double kTolerance = 1e-12;
constexpr uint64_t kSeed = 5;
constexpr int64_t kStep = 3;

class LossNormalisationTest : public ::testing::TestWithParam<ModelFamily> {};

// One mini-batch of 6 samples, once whole and once as micro-batches of 1, 2
// and 3 samples, each normalised by the 6 samples: the summed losses and the
// accumulated gradients are the whole mini-batch's mean.
TEST_P(LossNormalisationTest, MicroBatchSumsEqualTheMiniBatchMean) {
  const ModelConfig config = TinyConfig(GetParam());
  const at::Tensor tokens = RandomTokens(config, 6);
  const double samples = 6;

  auto whole = *BuildStage(config, {0, config.num_layers}, kSeed);
  const MicroBatch all =
      *MakeMicroBatch(config, tokens, SampleKey{kSeed, kStep, 0});
  const at::Tensor mean_loss =
      *LanguageModelLoss(whole->Forward(all.inputs), all, samples);
  mean_loss.backward();

  auto split = *BuildStage(config, {0, config.num_layers}, kSeed);
  double summed_loss = 0;
  for (const auto& [first, count] :
       {std::pair<int64_t, int64_t>{0, 1}, {1, 2}, {3, 3}}) {
    const MicroBatch part =
        *MakeMicroBatch(config, tokens.slice(0, first, first + count),
                        SampleKey{kSeed, kStep, first});
    const at::Tensor loss =
        *LanguageModelLoss(split->Forward(part.inputs), part, samples);
    loss.backward();
    summed_loss += loss.item<double>();
  }

  EXPECT_NEAR(summed_loss, mean_loss.item<double>(), kTolerance);
  const auto expected = whole->named_parameters();
  for (const auto& item : split->named_parameters()) {
    EXPECT_LE((item.value().grad() - expected[item.key()].grad())
                  .abs()
                  .max()
                  .item<double>(),
              kTolerance)
        << item.key();
  }
}

INSTANTIATE_TEST_SUITE_P(BothFamilies, LossNormalisationTest,
                         ::testing::Values(ModelFamily::kGpt,
                                           ModelFamily::kBert),
                         [](const auto& info) {
                           return std::string(ModelFamilyName(info.param));
                         });

TEST(LossTest, GptLossIsMeanTokenCrossEntropyWhenNormalisedByBatch) {
  const ModelConfig config = TinyConfig(ModelFamily::kGpt);
  const MicroBatch batch =
      *MakeMicroBatch(config, RandomTokens(config, 4), SampleKey{});
  const at::Tensor logits =
      at::randn({4, config.seq_length, config.vocab_size}, at::kDouble);
  const at::Tensor expected = at::cross_entropy_loss(
      logits.reshape({-1, config.vocab_size}), batch.targets.reshape({-1}));
  EXPECT_NEAR(LanguageModelLoss(logits, batch, 4)->item<double>(),
              expected.item<double>(), kTolerance);
}

TEST(LossTest, BertLossCountsOnlyMaskedPositions) {
  const ModelConfig config = TinyConfig(ModelFamily::kBert);
  const MicroBatch batch =
      *MakeMicroBatch(config, RandomTokens(config, 2), SampleKey{kSeed, 0, 0});
  const at::Tensor logits =
      at::randn({2, config.seq_length, config.vocab_size}, at::kDouble);
  // Logits at unmasked positions must not matter.
  const at::Tensor changed =
      logits.masked_fill(batch.loss_mask.logical_not().unsqueeze(-1), 100.0);
  EXPECT_NEAR(LanguageModelLoss(logits, batch, 2)->item<double>(),
              LanguageModelLoss(changed, batch, 2)->item<double>(), kTolerance);
}

TEST(LossTest, RejectsNonPositiveNormaliserAndMismatchedLogits) {
  const ModelConfig config = TinyConfig(ModelFamily::kGpt);
  const MicroBatch batch =
      *MakeMicroBatch(config, RandomTokens(config, 2), SampleKey{});
  const at::Tensor logits =
      at::zeros({2, config.seq_length, config.vocab_size}, at::kDouble);
  const auto zero = LanguageModelLoss(logits, batch, 0);
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(zero.status().message(), HasSubstr("normaliser is 0"));
  const auto wrong = LanguageModelLoss(logits.slice(0, 0, 1), batch, 2);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong.status().message(), HasSubstr("[2, 12]"));
}

}  // namespace
}  // namespace chimera::worker
