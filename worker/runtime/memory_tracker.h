// Exact CPU memory accounting for LibTorch tensors: a process-wide allocator
// that takes the place of LibTorch's default CPU allocator and counts the
// bytes of every live allocation, with the peak since the last ResetPeak().
//
//   MemoryTracker& memory = MemoryTracker::Install();  // before the model
//   memory.ResetPeak();
//   RunStep();
//   int64_t step_peak = memory.peak_bytes();
//
// Only allocations made after Install() are counted (tensors created before
// it are freed by their original allocator, untracked). GPU memory is not
// counted here; the CUDA caching allocator keeps its own statistics.
#ifndef CHIMERA_WORKER_RUNTIME_MEMORY_TRACKER_H_
#define CHIMERA_WORKER_RUNTIME_MEMORY_TRACKER_H_

#include <atomic>
#include <cstdint>

namespace chimera::worker {

class MemoryTracker {
 public:
  // Installs the tracking allocator as LibTorch's CPU allocator on the first
  // call and returns the process's one tracker on every call. Thread-safe.
  // The tracker is never destroyed: tensors alive at exit still refer to it.
  static MemoryTracker& Install();

  MemoryTracker(const MemoryTracker&) = delete;
  MemoryTracker& operator=(const MemoryTracker&) = delete;

  // Bytes of CPU tensor storage allocated since Install() and not yet freed.
  int64_t current_bytes() const {
    return current_bytes_.load(std::memory_order_relaxed);
  }
  // Highest current_bytes() since Install() or the last ResetPeak().
  int64_t peak_bytes() const {
    return peak_bytes_.load(std::memory_order_relaxed);
  }
  // Starts a new peak window at the current usage.
  void ResetPeak();

  // Called by the tracking allocator.
  void RecordAllocation(int64_t bytes);
  void RecordFree(int64_t bytes);

 private:
  MemoryTracker() = default;

  std::atomic<int64_t> current_bytes_{0};
  std::atomic<int64_t> peak_bytes_{0};
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_MEMORY_TRACKER_H_
