#include "worker/daemon/local_devices.h"

#include <torch/cuda.h>
#include <torch/version.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <utility>

#ifdef CHIMERA_HAVE_NCCL
#include <cuda_runtime_api.h>
#endif

namespace chimera::worker {
namespace {

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

int64_t PhysicalMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? int64_t{pages} * page_size : 0;
}

}  // namespace

std::optional<double> KnownPeakFlops(const std::string& gpu_name) {
  // The first name part that matches wins: the longer names come first.
  static const std::pair<const char*, double> kPeaks[] = {
      {"H200", 989e12}, {"H100 NVL", 835e12}, {"H100 PCIe", 756e12},
      {"H100", 989e12}, {"A100", 312e12},     {"L40S", 362e12},
      {"L4", 121e12}};
  for (const auto& [part, peak] : kPeaks) {
    if (gpu_name.find(part) != std::string::npos) return peak;
  }
  return std::nullopt;
}

LocalResources DiscoverLocalResources() {
  LocalResources resources;
  resources.node = HostName();
  resources.cpu_cores = static_cast<int>(std::thread::hardware_concurrency());
  resources.memory_bytes = PhysicalMemoryBytes();
  resources.torch_version = TORCH_VERSION;
  resources.devices.push_back({"cpu", 0, "cpu", resources.memory_bytes});
#ifdef CHIMERA_HAVE_NCCL
  resources.nccl = true;
#endif
  // torch::cuda::device_count() is 0 with a CPU-only LibTorch or no driver.
  const int gpus = static_cast<int>(torch::cuda::device_count());
#ifdef CHIMERA_HAVE_NCCL
  for (int i = 0; i < gpus; ++i) {
    cudaDeviceProp properties;
    if (cudaGetDeviceProperties(&properties, i) != cudaSuccess) continue;
    resources.devices.push_back(
        {"gpu", i, properties.name,
         static_cast<int64_t>(properties.totalGlobalMem)});
  }
#else
  for (int i = 0; i < gpus; ++i)
    resources.devices.push_back({"gpu", i, "cuda", 0});
#endif
  return resources;
}

}  // namespace chimera::worker
