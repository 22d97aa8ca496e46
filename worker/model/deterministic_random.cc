#include "worker/model/deterministic_random.h"

#include <ATen/ops/empty.h>

#include <cmath>

namespace chimera::worker {
namespace {

// SplitMix64's finaliser: a bijection on 64 bits with full avalanche.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

constexpr double kTwoPi = 6.283185307179586476925286766559;

}  // namespace

uint64_t KeyOf(uint64_t seed, absl::string_view name) {
  uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a offset basis
  for (const char c : name) {
    hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  }
  return Mix(Mix(seed) ^ hash);
}

uint64_t KeyOf(uint64_t seed, uint64_t value) {
  return Mix(Mix(seed) ^ Mix(value ^ 0x5851f42d4c957f2dULL));
}

double DeterministicUniform(uint64_t key, uint64_t counter) {
  return static_cast<double>(Mix(key ^ Mix(counter)) >> 11) * 0x1.0p-53;
}

at::Tensor DeterministicNormal(at::IntArrayRef sizes, double stddev,
                               uint64_t key, const at::TensorOptions& options) {
  at::Tensor values = at::empty(sizes, at::TensorOptions().dtype(at::kDouble));
  double* data = values.data_ptr<double>();
  const int64_t count = values.numel();
  for (int64_t i = 0; i < count; ++i) {
    // 1 - u lies in (0, 1], so the logarithm is finite.
    const double radius = std::sqrt(
        -2.0 * std::log(1.0 - DeterministicUniform(key, 2 * uint64_t(i))));
    const double angle =
        kTwoPi * DeterministicUniform(key, 2 * uint64_t(i) + 1);
    data[i] = stddev * radius * std::cos(angle);
  }
  return values.to(options);
}

}  // namespace chimera::worker
