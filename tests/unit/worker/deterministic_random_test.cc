#include "worker/model/deterministic_random.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace chimera::worker {
namespace {

const at::TensorOptions kDouble = at::TensorOptions().dtype(at::kDouble);

TEST(DeterministicRandomTest, NormalHasRequestedMeanAndStddev) {
  const at::Tensor values =
      DeterministicNormal({200000}, 0.02, KeyOf(1, "w"), kDouble);
  EXPECT_NEAR(values.mean().item<double>(), 0.0, 0.0002);
  EXPECT_NEAR(values.std().item<double>(), 0.02, 0.0002);
}

TEST(DeterministicRandomTest, SameKeySameValuesOtherKeyOtherValues) {
  const at::Tensor a = DeterministicNormal({64}, 1, KeyOf(1, "w"), kDouble);
  EXPECT_TRUE(
      at::equal(a, DeterministicNormal({64}, 1, KeyOf(1, "w"), kDouble)));
  EXPECT_FALSE(
      at::equal(a, DeterministicNormal({64}, 1, KeyOf(2, "w"), kDouble)));
  EXPECT_FALSE(
      at::equal(a, DeterministicNormal({64}, 1, KeyOf(1, "v"), kDouble)));
}

TEST(DeterministicRandomTest, UniformStaysInUnitInterval) {
  for (uint64_t i = 0; i < 10000; ++i) {
    const double u = DeterministicUniform(KeyOf(3, i), i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
}

}  // namespace
}  // namespace chimera::worker
