// chimera-worker: runs pipeline stages with LibTorch. This build reports what
// the machine offers; the daemon and standalone modes land with the runtime.
#include <CLI/CLI.hpp>
#include <iostream>

#include "common/version.h"
#include "worker/daemon/local_devices.h"

namespace {

void PrintDevices() {
  const chimera::worker::LocalResources resources =
      chimera::worker::DiscoverLocalResources();
  std::cout << "node " << resources.node << ", " << resources.cpu_cores
            << " CPU cores, " << resources.memory_bytes << " bytes memory\n"
            << "communicators: gloo" << (resources.nccl ? ", nccl" : "")
            << "\n";
  for (const auto& device : resources.devices) {
    std::cout << device.kind << ":" << device.index << " " << device.name
              << " " << device.memory_bytes << " bytes\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"chimera-worker: executes pipeline stages with LibTorch"};
  bool version = false;
  bool devices = false;
  app.add_flag("--version", version, "Print the version and the LibTorch it runs on");
  app.add_flag("--devices", devices, "Print the node, memory and devices this worker offers");
  CLI11_PARSE(app, argc, argv);
  if (version) {
    std::cout << "chimera-worker " << chimera::kVersion << " (LibTorch "
              << chimera::worker::DiscoverLocalResources().torch_version << ")\n";
  }
  if (devices) PrintDevices();
  if (!version && !devices) {
    std::cout << app.help();
    return 2;
  }
  return 0;
}
