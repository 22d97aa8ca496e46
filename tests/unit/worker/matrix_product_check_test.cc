#include "worker/runtime/matrix_product_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace chimera::worker {
namespace {

using ::testing::HasSubstr;

TEST(MatrixProductCheckTest, ThisProcessesBlasPasses) {
  EXPECT_TRUE(CheckMatrixProducts().ok()) << CheckMatrixProducts().message();
}

// Rounded once to float32 from an exact-enough float64 product: within any
// correct kernel's bound.
TEST(MatrixProductCheckTest, ACorrectlyRoundedProductPasses) {
  const absl::Status status =
      CheckMatrixProducts([](const at::Tensor& a, const at::Tensor& b) {
        return at::mm(a.to(at::kDouble), b.to(at::kDouble)).to(a.scalar_type());
      });
  EXPECT_TRUE(status.ok()) << status.message();
}

TEST(MatrixProductCheckTest, OneWrongElementFailsNamingIt) {
  const absl::Status status =
      CheckMatrixProducts([](const at::Tensor& a, const at::Tensor& b) {
        at::Tensor product = at::mm(a, b);
        product[3][5] += 1e-3;
        return product;
      });
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(),
              HasSubstr("Float product of 67x131 by 131x45: element (3, 5)"));
}

// Half precision inside is far outside float32's bound.
TEST(MatrixProductCheckTest, AProductInLowerPrecisionFails) {
  const absl::Status status =
      CheckMatrixProducts([](const at::Tensor& a, const at::Tensor& b) {
        return at::mm(a, b).to(at::kBFloat16).to(a.scalar_type());
      });
  EXPECT_THAT(status.message(), HasSubstr("Float product"));
}

TEST(MatrixProductCheckTest, TransposedOperandsAreChecked) {
  const absl::Status status =
      CheckMatrixProducts([](const at::Tensor& a, const at::Tensor& b) {
        at::Tensor product = at::mm(a, b);
        if (!a.is_contiguous()) product[0][0] *= 1.01;
        return product;
      });
  EXPECT_THAT(
      status.message(),
      HasSubstr("45x96 by 96x130 (transposed operands): element (0, 0)"));
}

}  // namespace
}  // namespace chimera::worker
