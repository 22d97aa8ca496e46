// The memory a worker's tensors use on its compute device, with the peak of
// a window (one training step): on the CPU from the tracking allocator
// (memory_tracker.h), on a GPU from the CUDA caching allocator's statistics
// (bytes handed to tensors, not the allocator's reserved cache).
//
//   DeviceMemory memory(device);  // before the model is built
//   memory.ResetPeak();
//   RunStep();
//   int64_t step_peak = memory.peak_bytes();
#ifndef CHIMERA_WORKER_RUNTIME_DEVICE_MEMORY_H_
#define CHIMERA_WORKER_RUNTIME_DEVICE_MEMORY_H_

#include <c10/core/Device.h>

#include <cstdint>

#include "absl/status/status.h"

namespace chimera::worker {

// OK when this process can compute on `device`: always for the CPU; for a
// CUDA device, FAILED_PRECONDITION unless LibTorch was built with CUDA, sees
// a GPU and was linked with its allocator statistics (CHIMERA_TORCH_CUDA),
// INVALID_ARGUMENT for an index past the GPUs it sees.
absl::Status CheckDeviceUsable(c10::Device device);

// Waits until all work queued on the device has finished (a no-op on the
// CPU), so host clocks time what the device did.
void SynchronizeDevice(c10::Device device);

class DeviceMemory {
 public:
  // `device` must have passed CheckDeviceUsable. On the CPU this installs the
  // tracking allocator.
  explicit DeviceMemory(c10::Device device);

  // Starts a new peak window at the current usage.
  void ResetPeak();
  int64_t current_bytes() const;
  // Highest current_bytes() since construction or the last ResetPeak().
  int64_t peak_bytes() const;
  // Highest usage of the process over every window, the first one from the
  // process's start on a GPU: what torch.cuda.max_memory_allocated() reports
  // when nothing resets the allocator's peak. An independent bound on what
  // the steps' peaks account for.
  int64_t process_peak_bytes() const;

 private:
  int64_t Bytes(bool peak) const;

  const c10::Device device_;
  // The highest peak of the windows ResetPeak() closed.
  int64_t closed_windows_peak_ = 0;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_DEVICE_MEMORY_H_
