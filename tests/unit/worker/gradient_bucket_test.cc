// A stage's gradient bucket: held for the run (zeroed after each update) or
// within a step only (freed after it), and in both cases the buffer autograd
// accumulates into.
#include "worker/runtime/gradient_bucket.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

namespace chimera::worker {
namespace {

std::vector<at::Tensor> Parameters() {
  return {at::ones({2, 3}, at::kDouble).requires_grad_(),
          at::ones({4}, at::kDouble).requires_grad_()};
}

// Accumulates d(sum of squares)/dθ = 2θ into every parameter's gradient.
void Backward(const std::vector<at::Tensor>& parameters) {
  at::Tensor loss = at::zeros({}, at::kDouble);
  for (const at::Tensor& parameter : parameters) {
    loss = loss + parameter.pow(2).sum();
  }
  loss.backward();
}

TEST(GradientBucketTest, ARunBucketIsHeldFromTheStartAndZeroedByReset) {
  std::vector<at::Tensor> parameters = Parameters();
  GradientBucket bucket(parameters, GradientBucket::Lifetime::kRun);
  ASSERT_TRUE(bucket.held());
  EXPECT_EQ(bucket.bytes(), 10 * 8);
  const at::Tensor buffer = bucket.Hold();
  Backward(parameters);
  EXPECT_TRUE(at::equal(buffer, at::full({10}, 2.0, at::kDouble)));

  bucket.Reset();
  ASSERT_TRUE(bucket.held());
  EXPECT_TRUE(at::equal(buffer, at::zeros({10}, at::kDouble)));
  EXPECT_TRUE(bucket.Hold().is_same(buffer)) << "a run bucket is never new";
  EXPECT_TRUE(parameters[1].grad().defined());
}

TEST(GradientBucketTest, AStepBucketIsHeldFromItsFirstUseUntilReset) {
  std::vector<at::Tensor> parameters = Parameters();
  GradientBucket bucket(parameters, GradientBucket::Lifetime::kStep);
  EXPECT_FALSE(bucket.held());
  EXPECT_EQ(bucket.bytes(), 10 * 8) << "known before it is held";
  EXPECT_FALSE(parameters[0].grad().defined());

  for (int step = 0; step < 2; ++step) {
    const at::Tensor buffer = bucket.Hold();
    ASSERT_TRUE(bucket.held());
    EXPECT_TRUE(at::equal(buffer, at::zeros({10}, at::kDouble)))
        << "step " << step;
    Backward(parameters);
    Backward(parameters);  // accumulated in place, into the buffer
    EXPECT_TRUE(at::equal(buffer, at::full({10}, 4.0, at::kDouble)))
        << "step " << step;

    bucket.Reset();
    EXPECT_FALSE(bucket.held());
    for (const at::Tensor& parameter : parameters) {
      EXPECT_FALSE(parameter.grad().defined()) << "step " << step;
    }
  }
}

}  // namespace
}  // namespace chimera::worker
