// A start-up check of the matrix products a process's BLAS computes: a few
// float32 and float64 products, of odd sizes that reach the kernels' edge
// blocks and with transposed operands, against a plain loop in float64.
//
// The tolerance is the forward error bound of any summation order: every
// element within k * eps * (|A| |B|) of the loop's, for inner dimension k and
// the dtype's machine epsilon (twice the unit roundoff u of the bound
// |fl(AB) - AB| <= k u |A||B|, because the float64 loop rounds too). Right
// kernels meet it in any order; a wrong kernel misses it by far.
#ifndef CHIMERA_WORKER_RUNTIME_MATRIX_PRODUCT_CHECK_H_
#define CHIMERA_WORKER_RUNTIME_MATRIX_PRODUCT_CHECK_H_

#include <ATen/ATen.h>

#include <functional>

#include "absl/status/status.h"

namespace chimera::worker {

using MatrixProduct =
    std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>;

// OK, or the first element out of bounds, naming the dtype and the shapes.
absl::Status CheckMatrixProducts(const MatrixProduct& product);
// The same for LibTorch's own at::mm (a default argument cannot name it:
// LibTorch 2 overloads it).
absl::Status CheckMatrixProducts();

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_MATRIX_PRODUCT_CHECK_H_
