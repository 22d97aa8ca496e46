#include "worker/runtime/asynchronous_weights.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace chimera::worker {
namespace {

using schedule::OpKind;
using schedule::UpdateRule;
using Id = AsynchronousWeights::MicroBatchId;

// SGD at learning rate 1 on a parameter of zeros.
OptimizerConfig UnitSgd() {
  OptimizerConfig config;
  config.lr = 1;
  return config;
}

at::Tensor Zeros() {
  at::Tensor theta = at::zeros({2}, at::kDouble).requires_grad_();
  theta.mutable_grad() = at::zeros_like(theta);
  return theta;
}

class AsynchronousWeightsTest : public ::testing::Test {
 protected:
  // The value of the parameter the stage points at now.
  double Value() const { return theta_.detach()[0].item<double>(); }

  // A backward's gradient of 1, then the update: every version one below
  // the last.
  void BackwardAndUpdate(AsynchronousWeights& weights, Id id) {
    ASSERT_TRUE(weights.Use(0, OpKind::kBackward, id).ok());
    theta_.mutable_grad().fill_(1);
    weights.Done(0, OpKind::kBackward, id);
    weights.Update(0, optimizer_);
  }

  at::Tensor theta_ = Zeros();
  Optimizer optimizer_{UnitSgd(), {theta_}};
};

// PipeDream on the first of three stages: three forwards in flight, each on
// the newest weights when it ran, and its backward on that same version.
TEST_F(AsynchronousWeightsTest, PipeDreamRunsABackwardOnItsForwardsVersion) {
  AsynchronousWeights weights(UpdateRule::kStashed, {{0, {theta_}}});
  for (int mb = 0; mb < 3; ++mb) {
    ASSERT_TRUE(weights.Use(0, OpKind::kForward, {0, mb}).ok());
  }
  BackwardAndUpdate(weights, {0, 0});  // version 1 = -1
  ASSERT_TRUE(weights.Use(0, OpKind::kForward, {0, 3}).ok());
  EXPECT_EQ(Value(), -1);
  // Micro-batches 1 and 2 ran on version 0 and still do.
  ASSERT_TRUE(weights.Use(0, OpKind::kBackward, {0, 1}).ok());
  EXPECT_EQ(Value(), 0);
  BackwardAndUpdate(weights, {0, 1});  // version 2 = -2
  // Version 3 = -3, over version 2, which nothing in flight ran on; 0 is
  // dropped first.
  BackwardAndUpdate(weights, {0, 2});
  EXPECT_EQ(weights.Kept(0), 2);  // 1 (micro-batch 3's) and 3
  ASSERT_TRUE(weights.Use(0, OpKind::kBackward, {0, 3}).ok());
  EXPECT_EQ(Value(), -1);
  // A drain needs every micro-batch done.
  EXPECT_EQ(weights.Restart().code(), absl::StatusCode::kInternal);
  weights.Done(0, OpKind::kBackward, {0, 3});
  ASSERT_TRUE(weights.Restart().ok());
  EXPECT_EQ(Value(), -3);
  EXPECT_EQ(weights.Kept(0), 1);
  EXPECT_EQ(weights.Use(0, OpKind::kBackward, {0, 9}).code(),
            absl::StatusCode::kInternal);
}

// PipeDream-2BW: step b runs on the weights after b - 1 updates, and two
// versions are kept.
TEST_F(AsynchronousWeightsTest, TwoBwRunsAStepOnTheWeightsOneUpdateOld) {
  AsynchronousWeights weights(UpdateRule::kDoubleBuffered, {{0, {theta_}}});
  ASSERT_TRUE(weights.Use(0, OpKind::kForward, {1, 0}).ok());
  EXPECT_EQ(Value(), 0);
  theta_.mutable_grad().fill_(1);
  weights.Update(0, optimizer_);  // version 1
  theta_.mutable_grad().fill_(1);
  weights.Update(0, optimizer_);  // version 2
  EXPECT_EQ(weights.Kept(0), 2);
  ASSERT_TRUE(weights.Use(0, OpKind::kBackward, {2, 0}).ok());
  EXPECT_EQ(Value(), -1);
  EXPECT_EQ(weights.Use(0, OpKind::kForward, {1, 0}).code(),
            absl::StatusCode::kInternal);
}

// After a drain, 2BW goes on as a run that starts from the newest weights:
// steps 0 and 1 on them, step 2 on the first update after them.
TEST_F(AsynchronousWeightsTest, TwoBwRestartsFromTheNewestWeights) {
  AsynchronousWeights weights(UpdateRule::kDoubleBuffered, {{0, {theta_}}});
  theta_.mutable_grad().fill_(1);
  weights.Update(0, optimizer_);  // version 1 = -1
  theta_.mutable_grad().fill_(1);
  weights.Update(0, optimizer_);  // version 2 = -2
  ASSERT_TRUE(weights.Restart().ok());
  EXPECT_EQ(Value(), -2);
  for (int64_t step : {0, 1}) {
    ASSERT_TRUE(weights.Use(0, OpKind::kForward, {step, 0}).ok());
    EXPECT_EQ(Value(), -2) << "step " << step;
  }
  theta_.mutable_grad().fill_(1);
  weights.Update(0, optimizer_);  // version 3 = -3
  ASSERT_TRUE(weights.Use(0, OpKind::kForward, {2, 0}).ok());
  EXPECT_EQ(Value(), -3);
}

}  // namespace
}  // namespace chimera::worker
