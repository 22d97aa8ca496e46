#include "worker/runtime/memory_tracker.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/alignment.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

#include <cstddef>
#include <cstdint>

namespace chimera::worker {
namespace {

// Each block carries its size in a header in front of the data. The header
// is LibTorch's CPU alignment long, so the data stays aligned, and the data
// pointer is the DataPtr's context as well: LibTorch's raw_allocate (used by
// some float32 kernels) requires that.
constexpr size_t kHeaderBytes = c10::gAlignment;
static_assert(kHeaderBytes >= sizeof(int64_t));

// LibTorch 2.3 made Allocator::allocate non-const and added copy_data.
#define CHIMERA_TORCH_2_3     \
  (TORCH_VERSION_MAJOR > 2 || \
   (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3))

// Set once by Install(), before the allocator is in use.
MemoryTracker* g_tracker = nullptr;
c10::DeleterFnPtr g_inner_free = nullptr;

class TrackingCpuAllocator final : public c10::Allocator {
 public:
  explicit TrackingCpuAllocator(c10::Allocator* inner) : inner_(inner) {}

#if CHIMERA_TORCH_2_3
  c10::DataPtr allocate(size_t bytes) override {
#else
  c10::DataPtr allocate(size_t bytes) const override {
#endif
    c10::DataPtr block = inner_->allocate(bytes + kHeaderBytes);
    // The default CPU allocator's block owns its pointer (context == data),
    // which Free hands back to the allocator's raw deleter.
    TORCH_INTERNAL_ASSERT(block.get() == block.get_context());
    const c10::Device device = block.device();
    char* base = static_cast<char*>(block.release_context());
    *reinterpret_cast<int64_t*>(base) = static_cast<int64_t>(bytes);
    g_tracker->RecordAllocation(static_cast<int64_t>(bytes));
    void* data = base + kHeaderBytes;
    return {data, data, &Free, device};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &Free; }

#if CHIMERA_TORCH_2_3
  void copy_data(void* dest, const void* src, size_t count) const override {
    default_copy_data(dest, src, count);
  }
#endif

 private:
  static void Free(void* data) {
    char* base = static_cast<char*>(data) - kHeaderBytes;
    g_tracker->RecordFree(*reinterpret_cast<int64_t*>(base));
    g_inner_free(base);
  }

  c10::Allocator* const inner_;
};

}  // namespace

MemoryTracker& MemoryTracker::Install() {
  // Leaked on purpose: freeing a tensor after static destruction must work.
  static MemoryTracker* const tracker = [] {
    c10::Allocator* inner = c10::GetDefaultCPUAllocator();
    g_inner_free = inner->raw_deleter();
    TORCH_INTERNAL_ASSERT(g_inner_free != nullptr);
    g_tracker = new MemoryTracker();
    static auto* const allocator = new TrackingCpuAllocator(inner);
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
