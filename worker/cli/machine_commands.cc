// `devices` and `version`: what this machine and this build offer.
#include <algorithm>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "common/build_info.h"
#include "common/byte_size.h"
#include "nlohmann/json.hpp"
#include "worker/cli/commands.h"
#include "worker/cli/exit_codes.h"
#include "worker/cli/shared_flags.h"
#include "worker/daemon/local_devices.h"
#include "worker/runtime/task_spec.h"

namespace chimera::worker::cli {
namespace {

void PrintDevicesAsJson(const LocalResources& resources, bool nccl) {
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& device : resources.devices) {
    devices.push_back({{"kind", device.kind},
                       {"index", device.index},
                       {"name", device.name},
                       {"memoryBytes", device.memory_bytes}});
  }
  const std::vector<std::string> communicators =
      nccl ? std::vector<std::string>{"gloo", "nccl"}
           : std::vector<std::string>{"gloo"};
  std::cout << nlohmann::json({{"node", resources.node},
                               {"cpuCores", resources.cpu_cores},
                               {"memoryBytes", resources.memory_bytes},
                               {"communicators", communicators},
                               {"devices", devices}})
                   .dump(2)
            << "\n";
}

void PrintDevices(bool json) {
  const LocalResources resources = DiscoverLocalResources();
  // NCCL serves only gpu tasks: it is on offer where this build can run them
  // and the machine has a GPU.
  const bool nccl =
      resources.nccl && kWorkerHasGpuRuntime &&
      std::any_of(resources.devices.begin(), resources.devices.end(),
                  [](const auto& device) { return device.kind == "gpu"; });
  if (json) return PrintDevicesAsJson(resources, nccl);
  std::cout << "node " << resources.node << ", " << resources.cpu_cores
            << " CPU cores, " << FormatBytes(resources.memory_bytes)
            << " memory\n"
            << "communicators: gloo" << (nccl ? ", nccl" : "") << "\n";
  for (const auto& device : resources.devices) {
    std::cout << device.kind << ":" << device.index << " " << device.name << " "
              << FormatBytes(device.memory_bytes) << "\n";
  }
}

// A subcommand that prints what `print` says, as text or (-o json) JSON.
void AddPrintingCommand(CLI::App& app, Invocation* invocation,
                        const std::string& name, const std::string& help,
                        std::function<void(bool json)> print) {
  auto output = std::make_shared<std::string>("text");
  CLI::App* command = app.add_subcommand(name, help);
  AddOutputFlag(command, output.get());
  command->callback([output, invocation, print = std::move(print)] {
    print(*output == "json");
    invocation->exit_code = kExitOk;
  });
}

}  // namespace

std::string VersionLine(bool json) {
  // The LibTorch the process runs on: the one it was built against, unless
  // the library path found another.
  const std::string runs_on = DiscoverLocalResources().torch_version;
  if (json) {
    nlohmann::json build =
        nlohmann::json::parse(DescribeBuildAsJson("chimera-worker"));
    build["runsOnLibtorch"] = runs_on;
    return build.dump();
  }
  return DescribeBuild("chimera-worker") + "; runs on LibTorch " + runs_on;
}

void AddDevicesCommand(CLI::App& app, Invocation* invocation) {
  AddPrintingCommand(app, invocation, "devices",
                     "Print the node, memory, communicators and devices this "
                     "worker offers",
                     PrintDevices);
}

void AddVersionCommand(CLI::App& app, Invocation* invocation) {
  AddPrintingCommand(
      app, invocation, "version",
      "Print the version, commit, build type and the LibTorch it runs on",
      [](bool json) { std::cout << VersionLine(json) << "\n"; });
}

}  // namespace chimera::worker::cli
