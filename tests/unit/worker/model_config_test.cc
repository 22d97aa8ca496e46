#include "worker/model/model_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/worker/test_models.h"

namespace chimera::worker {
namespace {

using ::testing::HasSubstr;
using testing::TinyConfig;

TEST(ModelConfigTest, AcceptsTheTestModels) {
  EXPECT_TRUE(ValidateModelConfig(TinyConfig(ModelFamily::kGpt)).ok());
  EXPECT_TRUE(ValidateModelConfig(TinyConfig(ModelFamily::kBert)).ok());
  EXPECT_TRUE(ValidateModelConfig(TinyConfig(ModelFamily::kLlama)).ok());
}

TEST(ModelConfigTest, NamesTheNonPositiveField) {
  ModelConfig config = TinyConfig(ModelFamily::kGpt);
  config.ffn_size = 0;
  const absl::Status status = ValidateModelConfig(config);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("model.ffn_size is 0"));
}

TEST(ModelConfigTest, HeadsMustDivideHiddenSize) {
  ModelConfig config = TinyConfig(ModelFamily::kGpt);
  config.num_heads = 3;
  EXPECT_THAT(ValidateModelConfig(config).message(),
              HasSubstr("must divide model.hidden_size (16)"));
}

TEST(ModelConfigTest, RejectsIntegerDtype) {
  ModelConfig config = TinyConfig(ModelFamily::kBert);
  config.dtype = c10::ScalarType::Int;
  EXPECT_THAT(ValidateModelConfig(config).message(),
              HasSubstr("model.dtype is Int"));
}

TEST(ModelConfigTest, LlamaKeyValueHeadsMustDivideTheHeads) {
  ModelConfig config = TinyConfig(ModelFamily::kLlama);
  config.num_kv_heads = 3;
  EXPECT_THAT(ValidateModelConfig(config).message(),
              HasSubstr("model.num_kv_heads is 3; it must divide "
                        "model.num_heads (4)"));
  config.num_kv_heads = 0;
  EXPECT_THAT(ValidateModelConfig(config).message(),
              HasSubstr("model.num_kv_heads is 0"));
}

TEST(ModelConfigTest, LlamaHeadsMustHaveAnEvenSizeForRotaryPairs) {
  ModelConfig config = TinyConfig(ModelFamily::kLlama);
  config.hidden_size = 12;  // 4 heads of 3
  EXPECT_THAT(ValidateModelConfig(config).message(),
              HasSubstr("model.hidden_size / model.num_heads is 3"));
}

TEST(ModelConfigTest, LlamaRopeThetaMustBePositive) {
  ModelConfig config = TinyConfig(ModelFamily::kLlama);
  config.rope_theta = 0;
  EXPECT_THAT(ValidateModelConfig(config).message(),
              HasSubstr("model.rope_theta is 0"));
}

TEST(ModelConfigTest, LlamaRopeScalingMustLeaveABandBetweenItsFactors) {
  const struct {
    RopeScaling scaling;
    const char* error;
  } cases[] = {
      {{.factor = 0.5}, "model.rope_scaling.factor is 0.5"},
      {{.factor = 8, .low_frequency_factor = 0},
       "model.rope_scaling.low_frequency_factor is 0"},
      {{.factor = 8, .low_frequency_factor = 4, .high_frequency_factor = 4},
       "model.rope_scaling.high_frequency_factor is 4"},
      {{.factor = 8, .original_context = -1},
       "model.rope_scaling.original_context is -1"},
  };
  for (const auto& c : cases) {
    ModelConfig config = TinyConfig(ModelFamily::kLlama);
    config.rope_scaling = c.scaling;
    EXPECT_THAT(ValidateModelConfig(config).message(), HasSubstr(c.error));
  }
}

}  // namespace
}  // namespace chimera::worker
