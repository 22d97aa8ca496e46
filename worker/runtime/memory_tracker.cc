#include "worker/runtime/memory_tracker.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <utility>

namespace chimera::worker {
namespace {

// What a tracked DataPtr's context holds: the wrapped allocator's DataPtr
// (which frees the memory when destroyed) and the size to un-count.
struct TrackedAllocation {
  c10::DataPtr inner;
  int64_t bytes;
  MemoryTracker* tracker;
};

class TrackingCpuAllocator final : public c10::Allocator {
 public:
  TrackingCpuAllocator(c10::Allocator* inner, MemoryTracker* tracker)
      : inner_(inner), tracker_(tracker) {}

  c10::DataPtr allocate(size_t bytes) const override {
    c10::DataPtr inner = inner_->allocate(bytes);
    void* data = inner.get();
    const c10::Device device = inner.device();
    tracker_->RecordAllocation(static_cast<int64_t>(bytes));
    auto* allocation = new TrackedAllocation{
        std::move(inner), static_cast<int64_t>(bytes), tracker_};
    return {data, allocation, &Free, device};
  }

  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

 private:
  static void Free(void* context) {
    auto* allocation = static_cast<TrackedAllocation*>(context);
    allocation->tracker->RecordFree(allocation->bytes);
    delete allocation;  // frees the memory through the inner DataPtr
  }

  c10::Allocator* const inner_;
  MemoryTracker* const tracker_;
};

}  // namespace

MemoryTracker& MemoryTracker::Install() {
  // Leaked on purpose: freeing a tensor after static destruction must work.
  static MemoryTracker* const tracker = [] {
    auto* created = new MemoryTracker();
    static auto* const allocator =
        new TrackingCpuAllocator(c10::GetDefaultCPUAllocator(), created);
    c10::SetCPUAllocator(allocator);
    return created;
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
