#include "worker/runtime/device_memory.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace chimera::worker {
namespace {

constexpr int64_t kBigBytes = (8 << 20) * sizeof(double);
constexpr int64_t kSmallBytes = (1 << 20) * sizeof(double);

// The process peak is what torch.cuda.max_memory_allocated() would say had
// nobody reset the peak: a closed window's peak stays in it.
TEST(DeviceMemoryTest, ProcessPeakKeepsTheHighestOfEveryWindow) {
  DeviceMemory memory{c10::Device(c10::DeviceType::CPU)};
  memory.ResetPeak();
  const int64_t before = memory.current_bytes();
  { at::Tensor big = at::empty({kBigBytes / 8}, at::kDouble); }
  EXPECT_GE(memory.process_peak_bytes(), before + kBigBytes);

  memory.ResetPeak();
  { at::Tensor small = at::empty({kSmallBytes / 8}, at::kDouble); }
  EXPECT_LT(memory.peak_bytes(), before + kBigBytes);
  EXPECT_GE(memory.peak_bytes(), before + kSmallBytes);
  EXPECT_GE(memory.process_peak_bytes(), before + kBigBytes);
}

TEST(DeviceMemoryTest, ProcessPeakIsNeverBelowTheWindowPeak) {
  DeviceMemory memory{c10::Device(c10::DeviceType::CPU)};
  memory.ResetPeak();
  at::Tensor held = at::empty({kSmallBytes / 8}, at::kDouble);
  EXPECT_GE(memory.process_peak_bytes(), memory.peak_bytes());
  EXPECT_GE(memory.peak_bytes(), memory.current_bytes());
}

}  // namespace
}  // namespace chimera::worker
