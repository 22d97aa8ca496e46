#include "worker/model/loss.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "tests/unit/worker/test_models.h"
#include "worker/model/micro_batch.h"
#include "worker/model/transformer_stage.h"
#include "worker/runtime/memory_tracker.h"

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

  auto whole = *BuildTransformerStage(config, {0, config.num_layers}, kSeed);
  const MicroBatch all =
      *MakeMicroBatch(config, tokens, SampleKey{kSeed, kStep, 0});
  const at::Tensor mean_loss =
      *LanguageModelLoss(whole->Forward(all.inputs), all, samples);
  mean_loss.backward();

  auto split = *BuildTransformerStage(config, {0, config.num_layers}, kSeed);
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

// The projection's parameters and the hidden states before it, as leaves.
struct Projection {
  at::Tensor normed, weight, bias;

  explicit Projection(const ModelConfig& config, int64_t samples,
                      at::ScalarType dtype = at::kDouble) {
    at::Generator generator = at::detail::createCPUGenerator(kSeed);
    const auto options = at::TensorOptions().dtype(dtype);
    normed = at::randn({samples, config.seq_length, config.hidden_size},
                       generator, options)
                 .requires_grad_(true);
    weight =
        at::randn({config.vocab_size, config.hidden_size}, generator, options)
            .requires_grad_(true);
    bias =
        at::randn({config.vocab_size}, generator, options).requires_grad_(true);
  }

  std::vector<at::Tensor> Gradients(const at::Tensor& loss) const {
    return torch::autograd::grad({loss}, {normed, weight, bias});
  }
};

class ProjectedLossTest
    : public ::testing::TestWithParam<std::tuple<ModelFamily, int64_t>> {};

// In chunks of one token, of 5 (which do not divide the 36) and of all, the
// loss and its gradients are the plain loss's of the whole logits.
TEST_P(ProjectedLossTest, EqualsTheLossOfTheWholeLogits) {
  const auto [family, chunk] = GetParam();
  const ModelConfig config = TinyConfig(family);
  const MicroBatch batch = *MakeMicroBatch(config, RandomTokens(config, 3),
                                           SampleKey{kSeed, kStep, 0});
  const Projection projection(config, 3);
  const at::Tensor expected = *LanguageModelLoss(
      at::linear(projection.normed, projection.weight, projection.bias), batch,
      7);
  const absl::StatusOr<at::Tensor> loss = ProjectedLanguageModelLoss(
      projection.normed, projection.weight, projection.bias, batch, 7, chunk);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(loss->item<double>(), expected.item<double>(), kTolerance);
  const std::vector<at::Tensor> want = projection.Gradients(expected);
  const std::vector<at::Tensor> got = projection.Gradients(*loss * 3.0);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(at::allclose(got[i], want[i] * 3.0, 0, kTolerance)) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Chunks, ProjectedLossTest,
    ::testing::Combine(::testing::Values(ModelFamily::kGpt, ModelFamily::kBert),
                       ::testing::Values(1, 5, 0)));

// Llama's head has no bias: the chunks then project by the weight alone.
TEST(ProjectedLossTest, WithoutABiasItIsTheLossOfTheWeightsProjection) {
  const ModelConfig config = TinyConfig(ModelFamily::kLlama);
  const MicroBatch batch = *MakeMicroBatch(config, RandomTokens(config, 3),
                                           SampleKey{kSeed, kStep, 0});
  const Projection projection(config, 3);
  const at::Tensor expected = *LanguageModelLoss(
      at::linear(projection.normed, projection.weight), batch, 7);
  const absl::StatusOr<at::Tensor> loss = ProjectedLanguageModelLoss(
      projection.normed, projection.weight, at::Tensor(), batch, 7, 5);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_NEAR(loss->item<double>(), expected.item<double>(), kTolerance);
  const auto gradients = [&](const at::Tensor& of) {
    return torch::autograd::grad({of}, {projection.normed, projection.weight});
  };
  const std::vector<at::Tensor> want = gradients(expected);
  const std::vector<at::Tensor> got = gradients(*loss);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(at::allclose(got[i], want[i], 0, kTolerance)) << i;
  }
}

TEST(ProjectedLossTest, WithoutAutogradItComputesTheLossAlone) {
  const ModelConfig config = TinyConfig(ModelFamily::kGpt);
  const MicroBatch batch =
      *MakeMicroBatch(config, RandomTokens(config, 2), SampleKey{});
  const Projection projection(config, 2);
  const double with_graph =
      ProjectedLanguageModelLoss(projection.normed, projection.weight,
                                 projection.bias, batch, 2, 4)
          ->item<double>();
  at::NoGradGuard no_grad;
  const at::Tensor loss = *ProjectedLanguageModelLoss(
      projection.normed, projection.weight, projection.bias, batch, 2, 4);
  EXPECT_FALSE(loss.requires_grad());
  EXPECT_DOUBLE_EQ(loss.item<double>(), with_graph);
}

// bfloat16 hidden states: the loss is taken in float32, as LanguageModelLoss
// takes it from bfloat16 logits.
TEST(ProjectedLossTest, BFloat16IsComputedInFloat32) {
  const ModelConfig config = TinyConfig(ModelFamily::kGpt);
  const MicroBatch batch =
      *MakeMicroBatch(config, RandomTokens(config, 2), SampleKey{});
  const Projection projection(config, 2, at::kBFloat16);
  const at::Tensor loss = *ProjectedLanguageModelLoss(
      projection.normed, projection.weight, projection.bias, batch, 2, 5);
  const at::Tensor expected = *LanguageModelLoss(
      at::linear(projection.normed, projection.weight, projection.bias), batch,
      2);
  EXPECT_EQ(loss.scalar_type(), at::kBFloat16);
  EXPECT_NEAR(loss.item<double>(), expected.item<double>(),
              1e-2 * expected.item<double>());
  const std::vector<at::Tensor> gradients = projection.Gradients(loss);
  EXPECT_EQ(gradients[1].scalar_type(), at::kBFloat16);
  EXPECT_TRUE(at::allclose(gradients[1].to(at::kFloat),
                           projection.Gradients(expected)[1].to(at::kFloat),
                           0.05, 1e-2));
}

// What the chunks are for: a GPT-sized vocabulary's logits are the largest
// tensors of a step, and in chunks no more than one chunk's are held.
TEST(ProjectedLossTest, HoldsOneChunkOfLogitsNotAll) {
  ModelConfig config = TinyConfig(ModelFamily::kGpt);
  config.vocab_size = 8192;
  config.seq_length = 256;
  const MicroBatch batch =
      *MakeMicroBatch(config, RandomTokens(config, 4), SampleKey{});
  MemoryTracker& memory = MemoryTracker::Install();
  const Projection projection(config, 4, at::kFloat);
  auto peak_of = [&](auto loss_of) {
    memory.ResetPeak();
    const int64_t before = memory.current_bytes();
    projection.Gradients(loss_of());
    return memory.peak_bytes() - before;
  };
  const int64_t whole = peak_of([&] {
    return *LanguageModelLoss(
        at::linear(projection.normed, projection.weight, projection.bias),
        batch, 4);
  });
  const int64_t chunked = peak_of([&] {
    return *ProjectedLanguageModelLoss(projection.normed, projection.weight,
                                       projection.bias, batch, 4, 128);
  });
  // The logits are 4 x 256 x 8192 floats, 32 MiB; a chunk's, 4 MiB.
  const int64_t logits = int64_t{4} * 256 * 8192 * 4;
  EXPECT_GT(whole, 2 * logits);
  EXPECT_LT(chunked, logits / 2);
}

// A CPU chunk stays near 8M logits; a GPU chunk carries enough tokens that
// its products outweigh re-reading the weight's gradient.
TEST(ProjectedLossTest, ChunksAreThickerOnAGpu) {
  const c10::Device cpu("cpu"), gpu("cuda:0");
  EXPECT_EQ(DefaultChunkTokens(50257, cpu), 166);
  EXPECT_EQ(DefaultChunkTokens(8, cpu), int64_t{1} << 20);
  EXPECT_EQ(DefaultChunkTokens(50257, gpu), 4096);
  EXPECT_EQ(DefaultChunkTokens(128256, gpu), 4096);
  EXPECT_EQ(DefaultChunkTokens(8, gpu), int64_t{1} << 20);
}

TEST(ProjectedLossTest, RejectsProjectionsThatDoNotChain) {
  const ModelConfig config = TinyConfig(ModelFamily::kGpt);
  const MicroBatch batch =
      *MakeMicroBatch(config, RandomTokens(config, 2), SampleKey{});
  const Projection projection(config, 2);
  const auto wrong = ProjectedLanguageModelLoss(
      projection.normed, projection.weight.slice(1, 0, 8), projection.bias,
      batch, 2);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong.status().message(),
              HasSubstr("does not chain: [2, 12, 16], [29, 8], [29]"));
  const auto short_batch =
      ProjectedLanguageModelLoss(projection.normed.slice(0, 0, 1),
                                 projection.weight, projection.bias, batch, 2);
  EXPECT_THAT(short_batch.status().message(),
              HasSubstr("matching targets [2, 12]"));
}

}  // namespace
}  // namespace chimera::worker
