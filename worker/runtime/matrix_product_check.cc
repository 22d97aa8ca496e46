#include "worker/runtime/matrix_product_check.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/strings/str_format.h"

namespace chimera::worker {
namespace {

struct ProductCase {
  int64_t m, k, n;
  // Operands laid out transposed, so BLAS gets its 'T' flags.
  bool transposed;
};

// Sizes no kernel block divides; about a million multiply-adds in all, a few
// milliseconds with the float64 loop.
constexpr ProductCase kCases[] = {{67, 131, 45, false}, {45, 96, 130, true}};

// Deterministic values in [-0.5, 0.5) that leave the global random
// generator alone: fractional parts of multiples of an irrational number.
at::Tensor Values(int64_t rows, int64_t columns, double offset) {
  return at::arange(rows * columns, at::kDouble)
      .add_(offset)
      .mul_(0.6180339887498949)
      .frac_()
      .sub_(0.5)
      .reshape({rows, columns});
}

at::Tensor Operand(int64_t rows, int64_t columns, bool transposed,
                   double offset, at::ScalarType dtype) {
  if (transposed) return Values(columns, rows, offset).to(dtype).t();
  return Values(rows, columns, offset).to(dtype);
}

// Row i of `lhs` times column j of `rhs` in float64, and the sum of the
// terms' magnitudes, which scales the error bound.
struct Reference {
  double value = 0;
  double magnitude = 0;
};

Reference ReferenceElement(const at::TensorAccessor<double, 2>& lhs,
                           const at::TensorAccessor<double, 2>& rhs, int64_t i,
                           int64_t j) {
  Reference reference;
  for (int64_t p = 0; p < lhs.size(1); ++p) {
    reference.value += lhs[i][p] * rhs[p][j];
    reference.magnitude += std::abs(lhs[i][p] * rhs[p][j]);
  }
  return reference;
}

absl::Status CheckCase(const MatrixProduct& product, at::ScalarType dtype,
                       const ProductCase& shape) {
  const at::Tensor a = Operand(shape.m, shape.k, shape.transposed, 0.0, dtype);
  const at::Tensor b = Operand(shape.k, shape.n, shape.transposed, 1e4, dtype);
  const at::Tensor result = product(a, b).to(at::kDouble).contiguous();
  const at::Tensor a64 = a.to(at::kDouble).contiguous();
  const at::Tensor b64 = b.to(at::kDouble).contiguous();
  const auto lhs = a64.accessor<double, 2>();
  const auto rhs = b64.accessor<double, 2>();
  const auto got = result.accessor<double, 2>();
  const double epsilon = dtype == at::kFloat
                             ? std::numeric_limits<float>::epsilon()
                             : std::numeric_limits<double>::epsilon();
  for (int64_t i = 0; i < shape.m; ++i) {
    for (int64_t j = 0; j < shape.n; ++j) {
      const Reference expected = ReferenceElement(lhs, rhs, i, j);
      const double tolerance = shape.k * epsilon * expected.magnitude;
      if (!(std::abs(got[i][j] - expected.value) <= tolerance)) {
        return absl::InternalError(absl::StrFormat(
            "%s product of %dx%d by %dx%d%s: element (%d, %d) is %.17g, "
            "expected %.17g within %.3g",
            c10::toString(dtype), shape.m, shape.k, shape.k, shape.n,
            shape.transposed ? " (transposed operands)" : "", i, j, got[i][j],
            expected.value, tolerance));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckMatrixProducts(const MatrixProduct& product) {
  for (const at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    for (const ProductCase& shape : kCases) {
      if (absl::Status status = CheckCase(product, dtype, shape); !status.ok())
        return status;
    }
  }
  return absl::OkStatus();
}

absl::Status CheckMatrixProducts() {
  return CheckMatrixProducts(
      [](const at::Tensor& a, const at::Tensor& b) { return at::mm(a, b); });
}

}  // namespace chimera::worker
