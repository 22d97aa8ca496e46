#include <iostream>
#include <memory>
#include <string>

#include "jobspec/job_file.h"
#include "worker/cli/commands.h"
#include "worker/cli/exit_codes.h"
#include "worker/cli/shared_flags.h"
#include "worker/profile/profiler.h"
#include "worker/runtime/blas_core.h"
#include "worker/runtime/compute_threads.h"

namespace chimera::worker::cli {
namespace {

struct ProfileFlags {
  std::string job_path;
  std::string out_path;  // Empty: stdout.
  std::string data_root;
  int gpu = 0;
};

int RunProfile(const ProfileFlags& flags, char** argv) {
  // It computes in this process: with OpenMP threads that sleep when idle,
  // on the BLAS core the CPU calls for.
  SettleBlasCore(OpenMpWaitEnvironment(), argv);
  const auto job =
      jobspec::LoadJobFile(flags.job_path, {.data_root = flags.data_root});
  if (!job.ok()) {
    std::cerr << "chimera-worker: " << job.status().message() << "\n";
    return kExitBadInput;
  }
  const auto profile = ProfileJob(*job, flags.gpu, flags.data_root);
  if (!profile.ok()) {
    std::cerr << "chimera-worker: profiling " << flags.job_path << ": "
              << profile.status().message() << "\n";
    return kExitFailed;
  }
  return WriteOut(ProfileToJson(*profile), flags.out_path);
}

}  // namespace

void AddProfileCommand(CLI::App& app, Invocation* invocation) {
  auto flags = std::make_shared<ProfileFlags>();
  CLI::App* command = app.add_subcommand(
      "profile",
      "Measure the job's per-layer costs on its device (the CPU, or for a "
      "gpu job the --gpu GPU) and write a model profile for the planner");
  command->add_option("--job", flags->job_path, "Job file")->required();
  AddOutFlag(command, &flags->out_path, "Profile file to write");
  AddGpuFlag(command, &flags->gpu, "CUDA device a gpu job is measured on (default 0)");
  AddDataRootFlag(command, &flags->data_root);
  command->callback([flags, invocation] {
    invocation->exit_code = RunProfile(*flags, invocation->argv);
  });
}

}  // namespace chimera::worker::cli
