#include "worker/runtime/memory_tracker.h"

#include <ATen/ATen.h>
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

TEST(MemoryTrackerTest, InstallReturnsTheOneTracker) {
  EXPECT_EQ(&MemoryTracker::Install(), &MemoryTracker::Install());
}

}  // namespace
}  // namespace chimera::worker
