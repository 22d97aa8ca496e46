#include "worker/model/micro_batch.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/worker/test_models.h"

namespace chimera::worker {
namespace {

using ::testing::HasSubstr;
using testing::RandomTokens;
using testing::TinyConfig;

TEST(MicroBatchTest, GptTargetsAreInputsShiftedByOne) {
  const ModelConfig config = TinyConfig(ModelFamily::kGpt);
  const at::Tensor tokens = RandomTokens(config, 3);
  const MicroBatch batch = *MakeMicroBatch(config, tokens, SampleKey{});
  EXPECT_TRUE(at::equal(batch.inputs, tokens.slice(1, 0, config.seq_length)));
  EXPECT_TRUE(at::equal(batch.targets, tokens.slice(1, 1)));
  EXPECT_TRUE(batch.loss_mask.all().item<bool>());
}

TEST(MicroBatchTest, BertMasksAboutFifteenPercentWithTheMaskId) {
  ModelConfig config = TinyConfig(ModelFamily::kBert);
  config.seq_length = 100;
  const at::Tensor tokens = RandomTokens(config, 200);
  const MicroBatch batch = *MakeMicroBatch(config, tokens, SampleKey{9, 1, 0});
  const double fraction = batch.loss_mask.to(at::kDouble).mean().item<double>();
  EXPECT_NEAR(fraction, kMaskedFraction, 0.01);
  EXPECT_TRUE(at::equal(batch.targets, tokens));
  EXPECT_TRUE(at::equal(batch.inputs.masked_select(batch.loss_mask),
                        at::full({batch.loss_mask.sum().item<int64_t>()},
                                 config.vocab_size - 1, at::kLong)));
  const at::Tensor kept = batch.loss_mask.logical_not();
  EXPECT_TRUE(
      at::equal(batch.inputs.masked_select(kept), tokens.masked_select(kept)));
}

TEST(MicroBatchTest, EveryBertSampleHasAMaskedPosition) {
  ModelConfig config = TinyConfig(ModelFamily::kBert);
  config.seq_length = 2;  // most samples draw no position below 15%
  const MicroBatch batch =
      *MakeMicroBatch(config, RandomTokens(config, 50), SampleKey{1, 0, 0});
  EXPECT_TRUE(batch.loss_mask.any(1).all().item<bool>());
}

TEST(MicroBatchTest, BertMaskDependsOnSampleIndexNotOnTheSplit) {
  const ModelConfig config = TinyConfig(ModelFamily::kBert);
  const at::Tensor tokens = RandomTokens(config, 4);
  const MicroBatch whole = *MakeMicroBatch(config, tokens, SampleKey{3, 7, 0});
  const MicroBatch tail =
      *MakeMicroBatch(config, tokens.slice(0, 2), SampleKey{3, 7, 2});
  EXPECT_TRUE(at::equal(whole.loss_mask.slice(0, 2), tail.loss_mask));
  const MicroBatch next_step =
      *MakeMicroBatch(config, tokens, SampleKey{3, 8, 0});
  EXPECT_FALSE(at::equal(whole.loss_mask, next_step.loss_mask));
}

TEST(MicroBatchTest, RejectsWrongTypeLengthAndIds) {
  const ModelConfig config = TinyConfig(ModelFamily::kGpt);
  const at::Tensor tokens = RandomTokens(config, 2);
  const auto floats =
      MakeMicroBatch(config, tokens.to(at::kFloat), SampleKey{});
  EXPECT_THAT(floats.status().message(), HasSubstr("int64"));
  const auto too_long = MakeMicroBatch(
      config, at::zeros({2, config.seq_length + 2}, at::kLong), SampleKey{});
  EXPECT_THAT(too_long.status().message(), HasSubstr("1 to 12 tokens"));
  const auto bad_id = MakeMicroBatch(
      config, tokens.index_fill(1, at::zeros({1}, at::kLong), 29), SampleKey{});
  EXPECT_EQ(bad_id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_id.status().message(), HasSubstr("token id 29"));
}

}  // namespace
}  // namespace chimera::worker
