// What this machine offers a worker: its node name, memory, CPU cores and
// CUDA devices. The daemon registers these with the coordinator;
// `chimera-worker devices` prints them.
//
//   LocalResources resources = DiscoverLocalResources();
#ifndef CHIMERA_WORKER_DAEMON_LOCAL_DEVICES_H_
#define CHIMERA_WORKER_DAEMON_LOCAL_DEVICES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace chimera::worker {

struct LocalDevice {
  // "cpu" or "gpu".
  std::string kind;
  int index = 0;
  std::string name;
  int64_t memory_bytes = 0;
};

struct LocalResources {
  std::string node;
  int cpu_cores = 0;
  int64_t memory_bytes = 0;
  std::vector<LocalDevice> devices;
  // Which communicators this build has.
  bool gloo = true;
  bool nccl = false;
  std::string torch_version;
};

LocalResources DiscoverLocalResources();

// The dense bf16 tensor-core peak FLOP/s of a GPU its CUDA name identifies
// ("NVIDIA H100 80GB HBM3"), from NVIDIA's data sheets; nullopt for one not
// listed.
std::optional<double> KnownPeakFlops(const std::string& gpu_name);

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_DAEMON_LOCAL_DEVICES_H_
