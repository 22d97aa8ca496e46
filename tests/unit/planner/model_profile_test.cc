#include "planner/model_profile.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chimera::planner {
namespace {

using ::testing::HasSubstr;

chimera::v1::LayerProfile Layer(const char* kind, double forward_at_1,
                                double forward_at_4) {
  chimera::v1::LayerProfile layer;
  layer.set_kind(kind);
  auto* a = layer.add_timings();
  a->set_micro_batch_size(1);
  a->set_forward_seconds(forward_at_1);
  a->set_backward_seconds(2 * forward_at_1);
  auto* b = layer.add_timings();
  b->set_micro_batch_size(4);
  b->set_forward_seconds(forward_at_4);
  b->set_backward_seconds(2 * forward_at_4);
  layer.set_activation_bytes_per_sample(100);
  layer.set_output_bytes_per_sample(10);
  layer.set_parameter_bytes(1000);
  layer.set_optimizer_seconds(0.25);
  return layer;
}

chimera::v1::ModelProfile Profile(int blocks) {
  chimera::v1::ModelProfile profile;
  profile.set_api_version("chimera.dev/v1alpha1");
  profile.set_kind("ModelProfile");
  *profile.add_layers() = Layer("embedding", 0.5, 1.0);
  for (int i = 0; i < blocks; ++i) *profile.add_layers() = Layer("block", 1.0, 2.0);
  *profile.add_layers() = Layer("head", 3.0, 6.0);
  return profile;
}

TEST(ModelProfileTest, InterpolatesBetweenProfiledSizes) {
  const auto layer = Layer("block", 1.0, 2.0);
  EXPECT_DOUBLE_EQ(CostAt(layer, 1).forward_seconds, 1.0);
  EXPECT_DOUBLE_EQ(CostAt(layer, 2).forward_seconds, 1.0 + 1.0 / 3);
  EXPECT_DOUBLE_EQ(CostAt(layer, 4).backward_seconds, 4.0);
}

// The split backward's halves, where measured, interpolate as the whole does;
// a stage has them only if every one of its layers has.
TEST(ModelProfileTest, BackwardHalvesInterpolateAndNeedEveryLayerOfAStage) {
  auto profile = Profile(2);
  for (auto& layer : *profile.mutable_layers()) {
    for (auto& timing : *layer.mutable_timings()) {
      timing.set_backward_input_seconds(0.75 * timing.backward_seconds());
      timing.set_backward_weight_seconds(0.5 * timing.backward_seconds());
    }
  }
  EXPECT_TRUE(ValidateProfile(profile, 2).empty());
  const LayerCost block = CostAt(profile.layers(1), 2);
  EXPECT_DOUBLE_EQ(block.backward_input_seconds, 0.75 * block.backward_seconds);
  EXPECT_DOUBLE_EQ(CostAt(profile.layers(1), 8).backward_weight_seconds,
                   0.5 * 4.0 * 2);
  const StageProfile first = ProfileStage(profile, {0, 2}, true, false, 1);
  EXPECT_DOUBLE_EQ(first.backward_input_seconds, 0.75 * 2 * (0.5 + 2 * 1.0));

  profile.mutable_layers(0)->mutable_timings(0)->clear_backward_input_seconds();
  profile.mutable_layers(0)->mutable_timings(0)->clear_backward_weight_seconds();
  EXPECT_LT(ProfileStage(profile, {0, 2}, true, false, 1).backward_input_seconds, 0);
  EXPECT_GE(ProfileStage(profile, {0, 2}, false, false, 1).backward_input_seconds, 0);
}

TEST(ModelProfileTest, AHalfWithoutTheOtherOrBelowZeroIsRejected) {
  auto profile = Profile(1);
  profile.mutable_layers(1)->mutable_timings(0)->set_backward_input_seconds(1);
  profile.mutable_layers(2)->mutable_timings(1)->set_backward_weight_seconds(-1);
  FieldErrors errors = ValidateProfile(profile, 0);
  ASSERT_EQ(errors.size(), 2u) << errors.ToStatus();
  EXPECT_EQ(errors.errors()[0].path, "layers[1].timings[0].backwardWeightSeconds");
  EXPECT_THAT(errors.errors()[0].message, HasSubstr("give both halves"));
  EXPECT_EQ(errors.errors()[1].path, "layers[2].timings[1].backwardWeightSeconds");
}

TEST(ModelProfileTest, ExtrapolatesLinearlyBeyondTheLargestSize) {
  EXPECT_DOUBLE_EQ(CostAt(Layer("block", 1.0, 2.0), 8).forward_seconds, 4.0);
}

TEST(ModelProfileTest, StageAddsEmbeddingAndHeadAtTheEnds) {
  const auto profile = Profile(4);
  const StageProfile first = ProfileStage(profile, {0, 2}, true, false, 1);
  EXPECT_DOUBLE_EQ(first.forward_seconds, 0.5 + 2 * 1.0);
  EXPECT_EQ(first.parameter_bytes, 3000);
  EXPECT_EQ(first.activation_bytes, 300);
  EXPECT_DOUBLE_EQ(first.optimizer_seconds, 3 * 0.25);
  const StageProfile last = ProfileStage(profile, {2, 2}, false, true, 4);
  EXPECT_DOUBLE_EQ(last.forward_seconds, 2 * 2.0 + 6.0);
  EXPECT_EQ(last.boundary_bytes, 40);
  EXPECT_EQ(last.activation_bytes, 3 * 400);
}

// A backward's own working memory is its largest layer's, per micro-batch.
TEST(ModelProfileTest, StageBackwardExtraIsItsLargestLayers) {
  auto profile = Profile(2);
  profile.mutable_layers(1)->set_backward_extra_bytes_per_sample(30);
  profile.mutable_layers(2)->set_backward_extra_bytes_per_sample(50);
  profile.mutable_layers(3)->set_backward_extra_bytes_per_sample(20);
  EXPECT_EQ(ProfileStage(profile, {0, 2}, false, true, 4).backward_extra_bytes,
            4 * 50);
  EXPECT_EQ(ProfileStage(profile, {0, 1}, true, false, 2).backward_extra_bytes,
            2 * 30);
  profile.mutable_layers(3)->set_backward_extra_bytes_per_sample(-1);
  const FieldErrors errors = ValidateProfile(profile, 0);
  ASSERT_EQ(errors.size(), 1u) << errors.ToStatus();
  EXPECT_EQ(errors.errors()[0].path, "layers[3].backwardExtraBytesPerSample");
}

TEST(ModelProfileTest, RejectsLayersOutOfOrderAndUnsortedTimings) {
  auto profile = Profile(2);
  profile.mutable_layers(1)->set_kind("head");
  profile.mutable_layers(2)->mutable_timings(1)->set_micro_batch_size(1);
  profile.mutable_layers(3)->set_optimizer_seconds(-1);
  FieldErrors errors = ValidateProfile(profile, 0);
  ASSERT_EQ(errors.size(), 3u) << errors.ToStatus();
  EXPECT_EQ(errors.errors()[0].path, "layers[1].kind");
  EXPECT_EQ(errors.errors()[1].path, "layers[2].timings[1].microBatchSize");
  EXPECT_EQ(errors.errors()[2].path, "layers[3].optimizerSeconds");
}

TEST(ModelProfileTest, BlockCountMustMatchTheJob) {
  FieldErrors errors = ValidateProfile(Profile(2), 8);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors.errors()[0].message, HasSubstr("has 2 blocks; the job's model has 8"));
}

}  // namespace
}  // namespace chimera::planner
