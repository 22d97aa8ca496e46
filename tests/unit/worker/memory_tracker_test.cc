#include "worker/runtime/memory_tracker.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/alignment.h>
#include <gtest/gtest.h>

namespace chimera::worker {
namespace {

constexpr int64_t kElements = 1 << 20;
constexpr int64_t kBytes = kElements * sizeof(double);

TEST(MemoryTrackerTest, CountsATensorWhileItLivesAndItsPeakAfter) {
  MemoryTracker& memory = MemoryTracker::Install();
  const int64_t before = memory.current_bytes();
  memory.ResetPeak();
  {
    at::Tensor tensor = at::empty({kElements}, at::kDouble);
    EXPECT_GE(memory.current_bytes(), before + kBytes);
  }
  EXPECT_EQ(memory.current_bytes(), before);
  EXPECT_GE(memory.peak_bytes(), before + kBytes);
}

TEST(MemoryTrackerTest, ResetPeakStartsANewWindow) {
  MemoryTracker& memory = MemoryTracker::Install();
  { at::Tensor big = at::empty({kElements}, at::kDouble); }
  memory.ResetPeak();
  EXPECT_EQ(memory.peak_bytes(), memory.current_bytes());
  { at::Tensor small = at::empty({1024}, at::kDouble); }
  EXPECT_GE(memory.peak_bytes(), memory.current_bytes() + 1024 * 8);
  EXPECT_LT(memory.peak_bytes(), memory.current_bytes() + kBytes);
}

// LibTorch's raw_allocate (used by float32 kernels) requires the data pointer
// to be the DataPtr's context and frees through raw_deleter().
TEST(MemoryTrackerTest, ServesRawAllocationsAndCountsThem) {
  MemoryTracker& memory = MemoryTracker::Install();
  const int64_t before = memory.current_bytes();
  c10::Allocator* allocator = c10::GetCPUAllocator();
  void* block = allocator->raw_allocate(kBytes);
  ASSERT_NE(block, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(block) % c10::gAlignment, 0u);
  EXPECT_GE(memory.current_bytes(), before + kBytes);
  allocator->raw_deallocate(block);
  EXPECT_EQ(memory.current_bytes(), before);
}

// A float32 model's forward and backward run under the tracker.
TEST(MemoryTrackerTest, Float32MatmulRunsUnderTheTracker) {
  MemoryTracker::Install();
  const at::Tensor a = at::ones({64, 64}, at::kFloat).requires_grad_();
  at::matmul(a, a).sum().backward();
  EXPECT_TRUE(at::allclose(a.grad(), at::full({64, 64}, 128.0f)));
}

TEST(MemoryTrackerTest, InstallReturnsTheOneTracker) {
  EXPECT_EQ(&MemoryTracker::Install(), &MemoryTracker::Install());
}

}  // namespace
}  // namespace chimera::worker
