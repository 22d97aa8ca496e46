// Counter-based random numbers that depend on nothing but their key: no
// generator state, no LibTorch RNG, no thread or device. A parameter's initial
// values and a BERT sample's mask are the same on every worker, on CPU and
// GPU, in every LibTorch version, and whichever stage builds them.
//
//   uint64_t key = KeyOf(job_seed, "layer3.qkv_weight");
//   at::Tensor w = DeterministicNormal({384, 128}, 0.02, key,
//                                      at::TensorOptions().dtype(at::kFloat));
//   double u = DeterministicUniform(key, /*counter=*/7);  // in [0, 1)
#ifndef CHIMERA_WORKER_MODEL_DETERMINISTIC_RANDOM_H_
#define CHIMERA_WORKER_MODEL_DETERMINISTIC_RANDOM_H_

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>

#include <cstdint>

#include "absl/strings/string_view.h"

namespace chimera::worker {

// A 64-bit key from a seed and a name (FNV-1a of the name, mixed with the
// seed); different names or seeds give unrelated keys.
uint64_t KeyOf(uint64_t seed, absl::string_view name);

// A key from a parent key and an integer (a step, a sample index).
uint64_t KeyOf(uint64_t seed, uint64_t value);

// The counter-th number of the stream `key`, uniform in [0, 1) with 53 bits.
double DeterministicUniform(uint64_t key, uint64_t counter);

// A tensor of `sizes` holding N(0, stddev²) values (Box–Muller over the
// stream `key`), computed in float64 on the CPU and then converted to
// options' dtype and device, so every dtype and device rounds the same values.
at::Tensor DeterministicNormal(at::IntArrayRef sizes, double stddev,
                               uint64_t key, const at::TensorOptions& options);

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_MODEL_DETERMINISTIC_RANDOM_H_
