#include <iostream>

#include "worker/cli/commands.h"
#include "worker/cli/exit_codes.h"
#include "worker/cli/shared_flags.h"
#include "worker/runtime/blas_core.h"
#include "worker/runtime/compute_threads.h"
#include "worker/standalone/standalone.h"

namespace chimera::worker::cli {
namespace {

int RunStandalone(const StandaloneFlags& flags, char** argv) {
  // It computes in this process: with OpenMP threads that sleep when idle,
  // on the BLAS core the CPU calls for.
  SettleBlasCore(OpenMpWaitEnvironment(), argv);
  const absl::StatusOr<StandaloneRun> run = PrepareStandalone(flags);
  if (!run.ok()) {
    std::cerr << "chimera-worker: " << run.status().message() << "\n";
    return kExitBadInput;
  }
  if (const absl::Status status = worker::RunStandalone(*run, std::cout);
      !status.ok()) {
    std::cerr << "chimera-worker: rank " << flags.rank << ": "
              << status.message() << "\n";
    return kExitFailed;
  }
  return kExitOk;
}

}  // namespace

void AddStandaloneCommand(CLI::App& app, Invocation* invocation) {
  auto flags = std::make_shared<StandaloneFlags>();
  CLI::App* command = app.add_subcommand(
      "standalone",
      "Run one rank of a job file without a coordinator: start one process "
      "per rank, rank 0 serving the rendezvous store at --store");
  command->add_option("--job", flags->job_path, "Job file")->required();
  command->add_option("--rank", flags->rank, "This process's rank, 0..world-1")
      ->required();
  command->add_option("--world", flags->world, "Number of ranks: data x pipeline")
      ->required();
  command->add_option("--store", flags->store,
                      "HOST:PORT of the rendezvous store; rank 0 serves it")
      ->required();
  command->add_option("--steps", flags->steps,
                      "Steps to run; default spec.training.maxSteps");
  command->add_option("--timeout", flags->timeout_seconds,
                      "Seconds any wait may take: the store, connecting, each "
                      "transfer and collective; a stopped peer is named once "
                      "they pass")
      ->capture_default_str();
  command->add_flag("--resume", flags->resume,
                    "Continue from the job's latest complete checkpoint; "
                    "without it a run starts over and replaces the job's "
                    "checkpoints");
  AddGpuFlag(command, &flags->gpu,
             "CUDA device of a gpu job (default: the rank's own, ranks of "
             "one machine on GPUs 0, 1, ...)");
  command->add_option("--gpu-transport", flags->gpu_transport,
                      "How a gpu job's ranks exchange tensors: nccl "
                      "(default), or gloo staged through host memory, for "
                      "ranks that share one GPU");
  AddRootFlags(command, &flags->data_root, &flags->checkpoint_root);
  command->callback([flags, invocation] {
    invocation->exit_code = RunStandalone(*flags, invocation->argv);
  });
}

}  // namespace chimera::worker::cli
