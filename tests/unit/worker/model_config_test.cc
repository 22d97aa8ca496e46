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

}  // namespace
}  // namespace chimera::worker
