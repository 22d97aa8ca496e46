// chimera-worker: runs pipeline stages with LibTorch. It reports what the
// machine offers (--devices) and runs one rank of a job without a coordinator
// (--standalone, see worker/standalone/standalone.h):
//
//   chimera-worker --standalone --job examples/chimera.yaml --rank 0
//       --world 4 --store 127.0.0.1:29500 [--steps 20]   # one per rank
//
// Exit codes: 0 success, 1 the job failed while running, 2 bad flags or job.
#include <CLI/CLI.hpp>
#include <iostream>
#include <string>
#include <utility>

#include "common/version.h"
#include "worker/daemon/local_devices.h"
#include "worker/standalone/standalone.h"

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

constexpr int kExitFailed = 1;
constexpr int kExitBadInput = 2;

int RunStandaloneMode(const chimera::worker::StandaloneFlags& flags) {
  for (const auto& [given, flag] :
       {std::pair<bool, const char*>{!flags.job_path.empty(), "--job"},
        {flags.rank >= 0, "--rank"},
        {flags.world > 0, "--world"},
        {!flags.store.empty(), "--store"}}) {
    if (!given) {
      std::cerr << "chimera-worker: " << flag
                << " is required with --standalone\n";
      return kExitBadInput;
    }
  }
  const auto run = chimera::worker::PrepareStandalone(flags);
  if (!run.ok()) {
    std::cerr << "chimera-worker: " << run.status().message() << "\n";
    return kExitBadInput;
  }
  const absl::Status status = chimera::worker::RunStandalone(*run, std::cout);
  if (!status.ok()) {
    std::cerr << "chimera-worker: rank " << flags.rank << ": "
              << status.message() << "\n";
    return kExitFailed;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"chimera-worker: executes pipeline stages with LibTorch"};
  bool version = false;
  bool devices = false;
  app.add_flag("--version", version, "Print the version and the LibTorch it runs on");
  app.add_flag("--devices", devices, "Print the node, memory and devices this worker offers");
  bool standalone = false;
  chimera::worker::StandaloneFlags flags;
  app.add_flag("--standalone", standalone,
               "Run one rank of a job file without a coordinator");
  app.add_option("--job", flags.job_path, "Job file (standalone)");
  app.add_option("--rank", flags.rank, "This worker's rank, 0..world-1 (standalone)");
  app.add_option("--world", flags.world, "Number of ranks: data x pipeline (standalone)");
  app.add_option("--store", flags.store,
                 "HOST:PORT of the rendezvous store; rank 0 serves it (standalone)");
  app.add_option("--steps", flags.steps,
                 "Steps to run; default spec.training.maxSteps (standalone)");
  CLI11_PARSE(app, argc, argv);
  if (standalone) return RunStandaloneMode(flags);
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
