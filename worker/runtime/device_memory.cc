#include "worker/runtime/device_memory.h"

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "worker/runtime/memory_tracker.h"

#ifdef CHIMERA_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace chimera::worker {
namespace {

#ifdef CHIMERA_TORCH_CUDA
// Bytes that tensors hold on DEVICE, now or at the peak. Each statistic's
// first entry sums every block kind (small and large pools): StatType's
// AGGREGATE, a name LibTorch 2.x moved out of CUDACachingAllocator.
int64_t AllocatedBytes(c10::Device device, bool peak) {
  const auto stats =
      c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
  const auto& all_blocks = stats.allocated_bytes[0];
  return peak ? all_blocks.peak : all_blocks.current;
}
#endif

}  // namespace

absl::Status CheckDeviceUsable(c10::Device device) {
  if (device.is_cpu()) return absl::OkStatus();
  if (!device.is_cuda()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device ", device.str(), " is neither the CPU nor a CUDA GPU"));
  }
#ifndef CHIMERA_TORCH_CUDA
  return absl::FailedPreconditionError(absl::StrCat(
      "device ", device.str(),
      " needs a worker built against a LibTorch with CUDA; this one is "
      "CPU-only"));
#else
  if (!at::hasCUDA()) {
    return absl::FailedPreconditionError(
        absl::StrCat("device ", device.str(),
                     ": LibTorch sees no CUDA GPU on this machine"));
  }
  const int gpus = at::detail::getCUDAHooks().getNumGPUs();
  if (!device.has_index() || device.index() < 0 || device.index() >= gpus) {
    return absl::InvalidArgumentError(
        absl::StrCat("device ", device.str(), " is not one of this machine's ",
                     gpus, " GPUs (cuda:0 to cuda:", gpus - 1, ")"));
  }
  return absl::OkStatus();
#endif
}

void SynchronizeDevice(c10::Device device) {
  if (device.is_cuda()) {
    at::detail::getCUDAHooks().deviceSynchronize(device.index());
  }
}

DeviceMemory::DeviceMemory(c10::Device device) : device_(device) {
  if (device_.is_cpu()) MemoryTracker::Install();
}

void DeviceMemory::ResetPeak() {
  closed_windows_peak_ = process_peak_bytes();
  if (device_.is_cpu()) {
    MemoryTracker::Install().ResetPeak();
    return;
  }
#ifdef CHIMERA_TORCH_CUDA
  c10::cuda::CUDACachingAllocator::resetPeakStats(device_.index());
#endif
}

int64_t DeviceMemory::current_bytes() const { return Bytes(/*peak=*/false); }

int64_t DeviceMemory::peak_bytes() const { return Bytes(/*peak=*/true); }

int64_t DeviceMemory::process_peak_bytes() const {
  return std::max(closed_windows_peak_, peak_bytes());
}

int64_t DeviceMemory::Bytes(bool peak) const {
  if (device_.is_cpu()) {
    const MemoryTracker& tracker = MemoryTracker::Install();
    return peak ? tracker.peak_bytes() : tracker.current_bytes();
  }
#ifdef CHIMERA_TORCH_CUDA
  return AllocatedBytes(device_, peak);
#else
  return 0;
#endif
}

}  // namespace chimera::worker
