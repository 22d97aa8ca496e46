#include "worker/runtime/memory_tracker.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/alignment.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

namespace chimera::worker {
namespace {

// Each block is one malloc'd region whose data starts at LibTorch's CPU
// alignment, with a header just in front naming the region and the size. The
// data pointer is the DataPtr's context as well: LibTorch's raw_allocate (used
// by some float32 kernels) requires that. Aligning by hand rather than with
// posix_memalign, as LibTorch's default allocator does, is what lets a step
// reuse freed memory: glibc serves an aligned request from a larger block
// than the one it frees, so a freed tensor never fits the next one of its
// size and the heap grows each step until it settles (see host_memory.h).
struct BlockHeader {
  void* region;
  int64_t bytes;
};
constexpr size_t kPaddingBytes = sizeof(BlockHeader) + c10::gAlignment;

// LibTorch 2.3 made Allocator::allocate non-const and added copy_data.
#define CHIMERA_TORCH_2_3     \
  (TORCH_VERSION_MAJOR > 2 || \
   (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3))

// Set once by Install(), before the allocator is in use.
MemoryTracker* g_tracker = nullptr;

BlockHeader* HeaderOf(void* data) {
  return static_cast<BlockHeader*>(data) - 1;
}

class TrackingCpuAllocator final : public c10::Allocator {
 public:
#if CHIMERA_TORCH_2_3
  c10::DataPtr allocate(size_t bytes) override {
#else
  c10::DataPtr allocate(size_t bytes) const override {
#endif
    void* region = std::malloc(bytes + kPaddingBytes);
    TORCH_CHECK(region != nullptr, "out of host memory: tried to allocate ",
                bytes, " bytes for a tensor");
    const uintptr_t first_free =
        reinterpret_cast<uintptr_t>(region) + sizeof(BlockHeader);
    void* data = reinterpret_cast<void*>(
        (first_free + c10::gAlignment - 1) & ~uintptr_t{c10::gAlignment - 1});
    *HeaderOf(data) = {region, static_cast<int64_t>(bytes)};
    g_tracker->RecordAllocation(static_cast<int64_t>(bytes));
    return {data, data, &Free, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &Free; }

#if CHIMERA_TORCH_2_3
  void copy_data(void* dest, const void* src, size_t count) const override {
    default_copy_data(dest, src, count);
  }
#endif

 private:
  static void Free(void* data) {
    if (data == nullptr) return;
    const BlockHeader header = *HeaderOf(data);
    g_tracker->RecordFree(header.bytes);
    std::free(header.region);
  }
};

}  // namespace

MemoryTracker& MemoryTracker::Install() {
  // Leaked on purpose: freeing a tensor after static destruction must work.
  static MemoryTracker* const tracker = [] {
    g_tracker = new MemoryTracker();
    static auto* const allocator = new TrackingCpuAllocator();
    c10::SetCPUAllocator(allocator);
    return g_tracker;
  }();
  return *tracker;
}

void MemoryTracker::ResetPeak() {
  peak_bytes_.store(current_bytes(), std::memory_order_relaxed);
}

void MemoryTracker::RecordAllocation(int64_t bytes) {
  const int64_t now =
      current_bytes_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t peak = peak_bytes_.load(std::memory_order_relaxed);
  while (now > peak && !peak_bytes_.compare_exchange_weak(
                           peak, now, std::memory_order_relaxed)) {
  }
}

void MemoryTracker::RecordFree(int64_t bytes) {
  current_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
}

}  // namespace chimera::worker
