#include "worker/runtime/weight_versions.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace chimera::worker {
namespace {

// f(x, θ) = sum((x·θ)²): its gradient depends on θ, so a backward on the
// wrong version shows.
at::Tensor Loss(const at::Tensor& x, const at::Tensor& theta) {
  return at::matmul(x, theta).pow(2).sum();
}

at::Tensor GradientAt(const at::Tensor& x, const at::Tensor& value) {
  at::Tensor theta = value.detach().clone().requires_grad_();
  Loss(x, theta).backward();
  return theta.grad();
}

class WeightVersionsTest : public ::testing::Test {
 protected:
  WeightVersionsTest() {
    at::manual_seed(3);
    theta_ = at::randn({3, 3}, at::kDouble).requires_grad_();
    theta_.mutable_grad() = at::zeros_like(theta_);
    for (at::Tensor& x : x_) x = at::randn({2, 3}, at::kDouble);
    config_.lr = 0.1;
  }

  at::Tensor theta_;
  at::Tensor x_[3];
  OptimizerConfig config_;
};

// 2BW's pattern: the forward of the next step's micro-batch runs on the
// newest version before the update, and its backward after it, while the
// update wrote the version after (into the other buffer).
TEST_F(WeightVersionsTest, ABackwardRunsOnTheVersionItsForwardRanOn) {
  const at::Tensor v0 = theta_.detach().clone();
  Optimizer optimizer(config_, {theta_});
  WeightVersions weights({theta_});
  ASSERT_TRUE(weights.Use(0).ok());
  Loss(x_[0], theta_).backward();
  weights.Update(optimizer);  // version 1 = v0 - lr g(x0, v0)
  const at::Tensor v1 = v0 - 0.1 * GradientAt(x_[0], v0);
  EXPECT_TRUE(at::equal(theta_, v0)) << "the parameters stay on version 0";

  ASSERT_TRUE(weights.Use(1).ok());
  EXPECT_TRUE(at::allclose(theta_, v1, 0, 1e-15));
  at::Tensor pending = Loss(x_[1], theta_);  // on version 1
  ASSERT_TRUE(weights.Use(0).ok());
  Loss(x_[2], theta_).backward();  // a micro-batch of the step before
  weights.DropBelow(1);
  weights.Update(optimizer);  // version 2 = v1 - lr g(x2, v0), over v0
  const at::Tensor v2 = v1 - 0.1 * GradientAt(x_[2], v0);

  ASSERT_TRUE(weights.Use(1).ok());
  pending.backward();  // no "modified by an inplace operation"
  EXPECT_TRUE(at::allclose(theta_.grad(), GradientAt(x_[1], v1), 0, 1e-15));
  ASSERT_TRUE(weights.Use(2).ok());
  EXPECT_TRUE(at::allclose(theta_, v2, 0, 1e-15));
}

// Versions stay until dropped, the newest always, and a dropped version's
// buffers hold the next one.
TEST_F(WeightVersionsTest, DroppedVersionsAreGoneAndTheirBuffersReused) {
  Optimizer optimizer(config_, {theta_});
  WeightVersions weights({theta_});
  EXPECT_TRUE(weights.Use(0).ok());
  EXPECT_EQ(weights.Use(1).code(), absl::StatusCode::kInternal);
  weights.Update(optimizer);
  weights.Update(optimizer);
  EXPECT_EQ(weights.newest(), 2);
  EXPECT_EQ(weights.kept(), 3);
  weights.DropBelow(5);  // never the newest
  EXPECT_EQ(weights.kept(), 1);
  EXPECT_EQ(weights.Use(1).code(), absl::StatusCode::kInternal);
  ASSERT_TRUE(weights.Use(2).ok());
  const void* version_two = theta_.data_ptr();
  weights.Update(optimizer);
  ASSERT_TRUE(weights.Use(3).ok());
  EXPECT_NE(theta_.data_ptr(), version_two);
  // Versions 0 and 1's buffers were free: version 3 took one of them.
  EXPECT_EQ(weights.kept(), 2);
}

}  // namespace
}  // namespace chimera::worker
