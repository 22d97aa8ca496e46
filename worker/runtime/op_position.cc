#include "worker/runtime/op_position.h"

#include <chrono>
#include <new>
#include <thread>

namespace chimera::worker {
namespace {

constexpr int kReadAttempts = 1000;

int64_t MonotonicNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

OpPositionBoard::OpPositionBoard(void* memory)
    // Zeroed memory is a valid Layout of lock-free atomics: no op yet.
    : layout_(std::launder(reinterpret_cast<Layout*>(memory))) {}

void OpPositionBoard::Enter(int64_t step, int instruction) {
  const uint64_t sequence = layout_->sequence.load(std::memory_order_relaxed);
  layout_->sequence.store(sequence + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  layout_->step.store(step, std::memory_order_relaxed);
  layout_->instruction.store(instruction, std::memory_order_relaxed);
  layout_->entered_nanos.store(MonotonicNanos(), std::memory_order_relaxed);
  layout_->sequence.store(sequence + 2, std::memory_order_release);
}

std::optional<OpPosition> OpPositionBoard::Read() const {
  // A write takes nanoseconds, but its writer may be stopped inside one
  // for good: a reader gives up rather than spin.
  for (int attempt = 0; attempt < kReadAttempts; ++attempt) {
    const uint64_t before = layout_->sequence.load(std::memory_order_acquire);
    if (before == 0) return std::nullopt;
    if (before % 2 == 1) {
      std::this_thread::yield();
      continue;
    }
    OpPosition position;
    position.step = layout_->step.load(std::memory_order_relaxed);
    position.instruction =
        static_cast<int>(layout_->instruction.load(std::memory_order_relaxed));
    const int64_t entered =
        layout_->entered_nanos.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (layout_->sequence.load(std::memory_order_relaxed) != before) continue;
    position.in_op = absl::Nanoseconds(MonotonicNanos() - entered);
    return position;
  }
  return std::nullopt;
}

}  // namespace chimera::worker
