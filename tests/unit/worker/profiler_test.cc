#include "worker/profile/profiler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "planner/model_profile.h"
#include "tests/support/scripted_model_files.h"
#include "tests/support/temp_dir.h"
#include "worker/runtime/device_memory.h"

namespace chimera::worker {
namespace {

ModelConfig TinyBert() {
  ModelConfig config;
  config.family = ModelFamily::kBert;
  config.num_layers = 3;
  config.hidden_size = 16;
  config.ffn_size = 24;
  config.num_heads = 2;
  config.vocab_size = 40;
  config.seq_length = 8;
  return config;
}

ProfileOptions FastOptions() {
  ProfileOptions options;
  options.max_micro_batch_size = 4;
  options.repetitions = 1;
  options.name = "tiny-bert-profile";
  return options;
}

TEST(ProfilerTest, ProfilePassesThePlannersValidationForTheModel) {
  const absl::StatusOr<chimera::v1::ModelProfile> profile =
      ProfileModel(TinyBert(), FastOptions());
  ASSERT_TRUE(profile.ok()) << profile.status();
  const FieldErrors errors = planner::ValidateProfile(*profile, 3);
  EXPECT_TRUE(errors.empty()) << errors.ToStatus();
  EXPECT_EQ(profile->source(), "measured");
  ASSERT_EQ(profile->layers_size(), 5);
  for (const auto& layer : profile->layers()) {
    ASSERT_EQ(layer.timings_size(), 3) << layer.kind();  // sizes 1, 2, 4
    EXPECT_EQ(layer.timings(2).micro_batch_size(), 4);
    EXPECT_GT(layer.activation_bytes_per_sample(), 0) << layer.kind();
  }
}

// A TorchScript model's own pieces are timed: tests/support/scripted_model.py's
// three blocks of a LayerNorm and an 8 x 8 linear layer, its embedding of
// 16 tokens and its 8 -> 16 head.
TEST(ProfilerTest, ATorchScriptModelsPiecesAreWhatIsProfiled) {
  const chimera::testing::TempDir dir;
  const chimera::testing::ProcessResult exported =
      chimera::testing::ExportScriptedModel(dir.path() + "/model");
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  ModelConfig config = chimera::testing::ScriptedModelConfig();
  ProfileOptions options = FastOptions();
  options.modules = FileUnderRoot{.root = dir.path(), .path = "model"};
  const absl::StatusOr<chimera::v1::ModelProfile> profile =
      ProfileModel(config, options);
  ASSERT_TRUE(profile.ok()) << profile.status();
  EXPECT_TRUE(planner::ValidateProfile(*profile, 3).empty());
  ASSERT_EQ(profile->layers_size(), 5);
  constexpr int64_t kFloat = 4;
  EXPECT_EQ(profile->layers(0).parameter_bytes(), 16 * 8 * kFloat);
  for (int block = 1; block <= 3; ++block) {
    EXPECT_EQ(profile->layers(block).kind(), "block");
    EXPECT_EQ(profile->layers(block).parameter_bytes(),
              (2 * 8 + 8 * 8 + 8) * kFloat);
  }
  EXPECT_EQ(profile->layers(4).parameter_bytes(), (8 * 16 + 16) * kFloat);
  EXPECT_GT(profile->layers(4).timings(0).backward_seconds(), 0);

  // Pieces the job's sizes do not describe are refused, as its tasks do.
  config.vocab_size = 32;
  EXPECT_THAT(std::string(ProfileModel(config, options).status().message()),
              ::testing::HasSubstr("has 16 for model.vocab_size"));
  options.modules.reset();
  EXPECT_EQ(ProfileModel(config, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ProfilerTest, MeasuredBytesMatchTheLayersShapes) {
  const ModelConfig c = TinyBert();
  const absl::StatusOr<chimera::v1::ModelProfile> profile =
      ProfileModel(c, FastOptions());
  ASSERT_TRUE(profile.ok()) << profile.status();
  const int64_t h = c.hidden_size, f = c.ffn_size, v = c.vocab_size;
  const int64_t s = c.seq_length;
  const auto& embedding = profile->layers(0);
  const auto& block = profile->layers(1);
  const auto& head = profile->layers(4);
  // float32 parameters: the same counts as the analytic profile's.
  EXPECT_EQ(embedding.parameter_bytes(), 4 * (v + s) * h);
  EXPECT_EQ(block.parameter_bytes(), 4 * (4 * h * h + 2 * h * f + 9 * h + f));
  EXPECT_EQ(head.parameter_bytes(), 4 * (2 * h + v * h + v));
  // Hidden states leave the embedding and every block.
  EXPECT_EQ(embedding.output_bytes_per_sample(), 4 * s * h);
  EXPECT_EQ(block.output_bytes_per_sample(), 4 * s * h);
  // A block keeps far more than its output for its backward (norms,
  // attention scores, MLP inputs).
  EXPECT_GT(block.activation_bytes_per_sample(),
            3 * block.output_bytes_per_sample());
  // Its backward holds the gradients of those as it goes, beyond them: at
  // least its input's gradient, and less than all it kept again.
  EXPECT_GE(block.backward_extra_bytes_per_sample(),
            block.output_bytes_per_sample());
  EXPECT_LT(block.backward_extra_bytes_per_sample(),
            block.activation_bytes_per_sample());
  // The head computes its loss in chunks: it keeps at least its input, and
  // no more than the planner's analytic bound (two logits and its input).
  EXPECT_GE(head.activation_bytes_per_sample(), 4 * s * h);
  EXPECT_LE(head.activation_bytes_per_sample(), 2 * 4 * s * v + 4 * s * h);
}

// Llama's layers as the planner's analytic profile counts them: parameters
// exactly, and a block's activations (planner/analytic_profile.h: twelve
// hidden-wide tensors a token, four FFN-wide ones and the attention
// probabilities) within 15 %.
TEST(ProfilerTest, LlamaMeasuredBytesMatchTheAnalyticModel) {
  ModelConfig c;
  c.family = ModelFamily::kLlama;
  c.num_layers = 2;
  c.hidden_size = 32;
  c.ffn_size = 48;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.vocab_size = 40;
  c.seq_length = 16;
  const absl::StatusOr<chimera::v1::ModelProfile> profile =
      ProfileModel(c, FastOptions());
  ASSERT_TRUE(profile.ok()) << profile.status();
  const int64_t h = 32, f = 48, v = 40, s = 16, a = 4, kv_width = 16;
  EXPECT_EQ(profile->layers(0).parameter_bytes(), 4 * v * h);
  EXPECT_EQ(profile->layers(1).parameter_bytes(),
            4 * (2 * h * h + 2 * h * kv_width + 3 * h * f + 2 * h));
  EXPECT_EQ(profile->layers(3).parameter_bytes(), 4 * (h + v * h));
  const double modelled = (12 * s * h + 4 * s * f + a * s * s) * 4.0;
  EXPECT_NEAR(profile->layers(1).activation_bytes_per_sample(), modelled,
              0.15 * modelled);
}

TEST(ProfilerTest, TimesTheOptimizerStepOfEveryLayer) {
  ProfileOptions options = FastOptions();
  options.optimizer = {.kind = OptimizerKind::kAdamW, .lr = 1e-3};
  const absl::StatusOr<chimera::v1::ModelProfile> profile =
      ProfileModel(TinyBert(), options);
  ASSERT_TRUE(profile.ok()) << profile.status();
  for (const auto& layer : profile->layers()) {
    EXPECT_GT(layer.optimizer_seconds(), 0) << layer.kind();
  }

  options.optimizer.eps = 0;
  EXPECT_THAT(ProfileModel(TinyBert(), options).status().message(),
              ::testing::HasSubstr("eps"));
}

TEST(ProfilerTest, JsonIsReadBackByThePlanner) {
  const absl::StatusOr<chimera::v1::ModelProfile> profile =
      ProfileModel(TinyBert(), FastOptions());
  ASSERT_TRUE(profile.ok()) << profile.status();
  const chimera::testing::TempDir dir;
  chimera::v1::ModelProfile read;
  const FieldErrors errors = planner::LoadProfileFile(
      dir.WriteFile("profile.json", ProfileToJson(*profile)),
      TinyBert().num_layers, &read);
  ASSERT_TRUE(errors.empty()) << errors.ToStatus();
  EXPECT_EQ(read.SerializeAsString(), profile->SerializeAsString());
}

TEST(ProfilerTest, RejectsOptionsOutOfRange) {
  ProfileOptions options = FastOptions();
  options.repetitions = 0;
  const absl::StatusOr<chimera::v1::ModelProfile> profile =
      ProfileModel(TinyBert(), options);
  EXPECT_EQ(profile.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(profile.status().message().find("repetitions 0"),
            std::string::npos)
      << profile.status();
}

TEST(ProfilerTest, ProfilesOnTheDeviceItIsGivenOrSaysWhyNot) {
  ProfileOptions options = FastOptions();
  const absl::StatusOr<chimera::v1::ModelProfile> on_cpu =
      ProfileModel(TinyBert(), options);
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.status();
  EXPECT_EQ(on_cpu->device(), "cpu");

  options.device = c10::Device(c10::DeviceType::CUDA, 0);
  const absl::Status usable = CheckDeviceUsable(options.device);
  const absl::StatusOr<chimera::v1::ModelProfile> on_gpu =
      ProfileModel(TinyBert(), options);
  if (usable.ok()) {
    ASSERT_TRUE(on_gpu.ok()) << on_gpu.status();
    EXPECT_EQ(on_gpu->device(), "cuda:0");
  } else {
    // A CPU-only worker: the reason its device is unusable, not a crash.
    EXPECT_EQ(on_gpu.status(), usable);
  }
}

}  // namespace
}  // namespace chimera::worker
