#include "worker/model/llama_block.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cmath>

namespace chimera::worker {
namespace {

constexpr double kTolerance = 1e-12;

at::Tensor RandomHeads(int64_t tokens, int64_t head_size, uint64_t seed) {
  at::Generator generator = at::detail::createCPUGenerator(seed);
  return at::randn({1, 2, tokens, head_size}, generator,
                   at::TensorOptions().dtype(at::kDouble));
}

TEST(RotaryEmbeddingTest, LeavesTheFirstPositionAsItIs) {
  const at::Tensor x = RandomHeads(5, 8, 1);
  const at::Tensor rotated = ApplyRotaryEmbedding(x, 10000);
  EXPECT_TRUE(
      at::allclose(rotated.select(2, 0), x.select(2, 0), 0, kTolerance));
  EXPECT_FALSE(at::allclose(rotated.select(2, 1), x.select(2, 1)));
}

// Element i of a head's first half and element i of its second half form a
// pair rotated by position · theta^(−2i / head_size).
TEST(RotaryEmbeddingTest, RotatesEachPairOfHalvesByItsAngle) {
  const at::Tensor x = RandomHeads(4, 6, 2);
  const at::Tensor rotated = ApplyRotaryEmbedding(x, 100);
  const int64_t position = 3, i = 1;
  const double angle = position * std::pow(100.0, -2.0 * i / 6);
  const double a = x[0][1][position][i].item<double>();
  const double b = x[0][1][position][i + 3].item<double>();
  EXPECT_NEAR(rotated[0][1][position][i].item<double>(),
              a * std::cos(angle) - b * std::sin(angle), kTolerance);
  EXPECT_NEAR(rotated[0][1][position][i + 3].item<double>(),
              b * std::cos(angle) + a * std::sin(angle), kTolerance);
}

// Llama 3.1's scaling at its published settings (factor 8, frequency factors
// 1 and 4, context 8192), head size 128, theta 500000: frequencies of
// wavelength under 2048 are kept, over 8192 divided by 8, and those between
// interpolated linearly in 8192 / wavelength.
TEST(RotaryEmbeddingTest, Llama31ScalingLowersTheSlowFrequenciesOnly) {
  const RopeScaling scaling{.factor = 8,
                            .low_frequency_factor = 1,
                            .high_frequency_factor = 4,
                            .original_context = 8192};
  const at::Tensor plain = RotaryFrequencies(128, 500000, RopeScaling{});
  const at::Tensor scaled = RotaryFrequencies(128, 500000, scaling);
  ASSERT_EQ(scaled.size(0), 64);
  int kept = 0, divided = 0, between = 0;
  for (int64_t i = 0; i < 64; ++i) {
    const double omega = plain[i].item<double>();
    EXPECT_NEAR(omega, std::pow(500000.0, -2.0 * i / 128), 1e-15);
    const double wavelength = 2 * M_PI / omega;
    const double got = scaled[i].item<double>();
    if (wavelength < 2048) {
      EXPECT_EQ(got, omega) << i;
      ++kept;
    } else if (wavelength > 8192) {
      EXPECT_NEAR(got, omega / 8, 1e-15) << i;
      ++divided;
    } else {
      const double smooth = (8192 / wavelength - 1) / 3;
      EXPECT_NEAR(got, (1 - smooth) * omega / 8 + smooth * omega, 1e-15) << i;
      ++between;
    }
  }
  // Each band is exercised.
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(between, 0);
}

// What makes it a position encoding for attention: the product of a rotated
// query and key depends on their distance, not on where they are.
TEST(RotaryEmbeddingTest, QueryKeyProductsDependOnDistanceAlone) {
  const at::Tensor query = RandomHeads(1, 8, 3).squeeze();  // [2, 8]: 2 heads
  const at::Tensor key = RandomHeads(1, 8, 4).squeeze();
  // Both vectors at every position, then rotated.
  const auto at_every_position = [](const at::Tensor& v) {
    return ApplyRotaryEmbedding(
        v.unsqueeze(1).expand({2, 10, 8}).unsqueeze(0).contiguous(), 500000);
  };
  const at::Tensor q = at_every_position(query)[0][0];
  const at::Tensor k = at_every_position(key)[0][0];
  const double distance_three = q[5].dot(k[2]).item<double>();
  EXPECT_NEAR(q[9].dot(k[6]).item<double>(), distance_three, kTolerance);
  EXPECT_NEAR(q[3].dot(k[0]).item<double>(), distance_three, kTolerance);
  EXPECT_GT(std::abs(q[5].dot(k[3]).item<double>() - distance_three), 1e-6);
}

}  // namespace
}  // namespace chimera::worker
