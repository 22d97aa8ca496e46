#include "worker/runtime/compute_threads.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>

namespace chimera::worker {
namespace {

double CpuSecondsOfThisProcess() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// Debian's LibTorch runs on OpenBLAS's pthread build, which ignores
// at::set_num_threads.
TEST(ComputeThreadsTest, OpenBlasIsSetToTheThreadsGiven) {
  LimitComputeThreads(1);
  const std::optional<int> blas = BlasThreads();
  ASSERT_TRUE(blas.has_value()) << "this LibTorch's BLAS is not OpenBLAS";
  EXPECT_EQ(*blas, 1);
  EXPECT_EQ(at::get_num_threads(), 1);
}

// The measurement the setting exists for: matrix products on one thread take
// at most one core's worth of CPU time per wall-clock second (plus a margin
// for the process's other threads). Unlimited, OpenBLAS takes every core.
TEST(ComputeThreadsTest, ProductsTakeAtMostOneCoreWhenLimitedToOneThread) {
  LimitComputeThreads(1);
  const at::Tensor a = at::randn({512, 768});
  const at::Tensor b = at::randn({768, 768});
  at::Tensor sink = at::mm(a, b);  // warm-up: BLAS threads start here
  const double cpu_start = CpuSecondsOfThisProcess();
  const auto wall_start = std::chrono::steady_clock::now();
  std::chrono::duration<double> wall{};
  while (wall.count() < 1.0) {
    sink.add_(at::mm(a, b));
    wall = std::chrono::steady_clock::now() - wall_start;
  }
  const double cpu_per_wall =
      (CpuSecondsOfThisProcess() - cpu_start) / wall.count();
  EXPECT_LE(cpu_per_wall, 1.25) << "CPU seconds per wall second";
}

// What the daemon gives a task process, so OpenBLAS sizes its pool right when
// it loads and idle OpenMP threads sleep instead of spinning against it.
TEST(ComputeThreadsTest, EnvironmentSizesEveryPoolOfAProcessToStart) {
  const std::map<std::string, std::string> environment =
      ComputeThreadsEnvironment(3);
  EXPECT_EQ(environment.at("OPENBLAS_NUM_THREADS"), "3");
  EXPECT_EQ(environment.at("OMP_NUM_THREADS"), "3");
  EXPECT_EQ(environment.at("MKL_NUM_THREADS"), "3");
  EXPECT_EQ(environment.at("OMP_WAIT_POLICY"), "passive");
}

}  // namespace
}  // namespace chimera::worker
