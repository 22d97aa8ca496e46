#include "worker/runtime/optimizer.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

namespace chimera::worker {
namespace {

// One scalar parameter θ = 1 with the given gradient per step.
at::Tensor Parameter() {
  at::Tensor parameter = at::ones({1}, at::kDouble).requires_grad_();
  parameter.mutable_grad() = at::zeros_like(parameter);
  return parameter;
}

double Value(const at::Tensor& t) { return t.item<double>(); }

TEST(OptimizerTest, SgdWithMomentumFollowsPyTorchsRule) {
  at::Tensor theta = Parameter();
  OptimizerConfig config;
  config.lr = 0.1;
  config.momentum = 0.9;
  config.weight_decay = 0.5;
  Optimizer optimizer(config, {theta});
  theta.mutable_grad().fill_(2.0);
  optimizer.Step();
  // g = 2 + 0.5·1 = 2.5; b = 2.5; θ = 1 − 0.25.
  EXPECT_DOUBLE_EQ(Value(theta), 0.75);
  EXPECT_EQ(Value(theta.grad()), 0.0) << "the step zeroes the gradient";
  theta.mutable_grad().fill_(2.0);
  optimizer.Step();
  // g = 2 + 0.375; b = 0.9·2.5 + 2.375 = 4.625; θ = 0.75 − 0.4625.
  EXPECT_DOUBLE_EQ(Value(theta), 0.75 - 0.4625);
}

TEST(OptimizerTest, AdamWDecaysDecoupledAndCorrectsBias) {
  at::Tensor theta = Parameter();
  OptimizerConfig config;
  config.kind = OptimizerKind::kAdamW;
  config.lr = 0.01;
  config.weight_decay = 0.1;
  Optimizer optimizer(config, {theta});
  double expected = 1.0, m = 0, v = 0;
  for (int t = 1; t <= 3; ++t) {
    const double g = 0.5 * t;
    theta.mutable_grad().fill_(g);
    optimizer.Step();
    expected *= 1 - 0.01 * 0.1;
    m = 0.9 * m + 0.1 * g;
    v = 0.999 * v + 0.001 * g * g;
    const double m_hat = m / (1 - std::pow(0.9, t));
    const double v_hat = v / (1 - std::pow(0.999, t));
    expected -= 0.01 * m_hat / (std::sqrt(v_hat) + 1e-8);
    EXPECT_NEAR(Value(theta), expected, 1e-15) << "step " << t;
  }
  EXPECT_EQ(optimizer.steps(), 3);
}

// Dense CPU float/double parameters take a fused one-pass update, others
// (here: strided ones) the tensor-op form; both compute the same steps.
TEST(OptimizerTest, FusedAndTensorOpAdamWAgree) {
  const at::Tensor start = at::randn({6, 4}, at::kDouble);
  at::Tensor dense = start.clone().requires_grad_();
  // The same values in a column-major layout: not contiguous.
  at::Tensor strided = at::empty_strided({6, 4}, {1, 6}, at::kDouble);
  strided.copy_(start);
  strided.requires_grad_();
  ASSERT_FALSE(strided.is_contiguous());
  OptimizerConfig config;
  config.kind = OptimizerKind::kAdamW;
  config.lr = 0.05;
  config.weight_decay = 0.01;
  Optimizer fused(config, {dense});
  Optimizer tensor_ops(config, {strided});
  for (int t = 1; t <= 3; ++t) {
    const at::Tensor gradient = at::randn({6, 4}, at::kDouble);
    dense.mutable_grad() = gradient.clone();
    strided.mutable_grad() =
        at::empty_strided({6, 4}, {1, 6}, at::kDouble).copy_(gradient);
    fused.Step();
    tensor_ops.Step();
    EXPECT_TRUE(at::allclose(dense, strided, 1e-14, 1e-15)) << "step " << t;
    EXPECT_EQ(dense.grad().abs().sum().item<double>(), 0.0);
  }
  EXPECT_FALSE(at::equal(dense, start));
}

TEST(OptimizerTest, ValidationNamesTheField) {
  OptimizerConfig config;
  config.lr = 0;
  EXPECT_NE(ValidateOptimizerConfig(config).message().find("lr"),
            std::string::npos);
  config.lr = 1;
  config.momentum = 1;
  EXPECT_NE(ValidateOptimizerConfig(config).message().find("momentum is 1"),
            std::string::npos);
  EXPECT_FALSE(ParseOptimizerKind("adam").ok());
}

}  // namespace
}  // namespace chimera::worker
