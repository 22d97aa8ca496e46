#include "worker/model/stage_factory.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/directory.h"
#include "tests/support/scripted_model_files.h"
#include "tests/support/temp_dir.h"
#include "worker/model/transformer_stage.h"

namespace chimera::worker {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// The test model's sizes, in float64.
ModelConfig ScriptedConfig() {
  ModelConfig config = chimera::testing::ScriptedModelConfig();
  config.dtype = at::kDouble;
  return config;
}

class StageFactoryTest : public chimera::testing::ScriptedModelSuite {
 protected:
  static absl::StatusOr<StageFactory> Scripted(const ModelConfig& config) {
    return StageFactory::Scripted(ModelDirectory(), config,
                                  c10::Device(c10::DeviceType::CPU));
  }
};

TEST_F(StageFactoryTest, ScriptedStagesDivideTheLoadedModel) {
  absl::StatusOr<StageFactory> factory = Scripted(ScriptedConfig());
  ASSERT_TRUE(factory.ok()) << factory.status();
  absl::StatusOr<std::shared_ptr<Stage>> first = factory->Build({0, 1});
  absl::StatusOr<std::shared_ptr<Stage>> last = factory->Build({1, 3});
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_TRUE((*first)->is_first());
  EXPECT_FALSE((*first)->is_last());
  EXPECT_TRUE((*last)->is_last());
  // A scripted embedding is the user's: no row-sparse gradient is assumed.
  EXPECT_FALSE((*first)->token_table().defined());
  EXPECT_EQ(
      (*first)->named_parameters().size() + (*last)->named_parameters().size(),
      1 + 3 * 4 + 2);  // embedding, blocks, head
  EXPECT_EQ(factory->Build({2, 4}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(StageFactoryTest, ScriptedPiecesOfOtherSizesThanTheJobsAreRefused) {
  struct Mismatch {
    void (*change)(ModelConfig&);
    std::string message;
  };
  for (const Mismatch& mismatch : {
           Mismatch{[](ModelConfig& c) { c.num_layers = 4; },
                    "has 3 for model.num_layers (its blocks); the job "
                    "declares 4"},
           Mismatch{[](ModelConfig& c) { c.hidden_size = 16; },
                    "has 8 for model.hidden_size"},
           Mismatch{[](ModelConfig& c) { c.vocab_size = 256; },
                    "has 16 for model.vocab_size"},
       }) {
    ModelConfig config = ScriptedConfig();
    mismatch.change(config);
    const absl::Status status = Scripted(config).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()),
                AllOf(HasSubstr("the TorchScript model in 'model'"),
                      HasSubstr(mismatch.message)));
  }
}

TEST(TransformerStageFactoryTest, BuildsTheFamilysStageFromTheSeed) {
  ModelConfig config;
  config.num_layers = 2;
  config.hidden_size = 8;
  config.ffn_size = 16;
  config.num_heads = 2;
  config.vocab_size = 32;
  config.seq_length = 4;
  const StageFactory factory = StageFactory::Transformer(
      config, /*seed=*/5, c10::Device(c10::DeviceType::CPU));
  absl::StatusOr<std::shared_ptr<Stage>> built = factory.Build({0, 2});
  ASSERT_TRUE(built.ok()) << built.status();
  const std::shared_ptr<TransformerStage> direct =
      *BuildTransformerStage(config, {0, 2}, /*seed=*/5);
  const auto expected = direct->named_parameters();
  ASSERT_EQ((*built)->named_parameters().size(), expected.size());
  for (const auto& item : (*built)->named_parameters()) {
    EXPECT_TRUE(at::equal(item.value(), expected[item.key()])) << item.key();
  }
  EXPECT_TRUE((*built)->token_table().defined());
  EXPECT_EQ(factory.Build({1, 3}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace chimera::worker
