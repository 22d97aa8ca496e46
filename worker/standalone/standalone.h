// `chimera-worker standalone`: one rank of a job run without a coordinator.
// Every rank reads the same job file, generates and validates the same
// schedule and partition, meets the others at a TCP store that rank 0 hosts,
// and runs its program for the job's steps; the lowest rank holding the
// model's last stage prints one line per step.
//
//   ASSIGN_OR_RETURN(StandaloneRun run, PrepareStandalone(flags));  // exit 2
//   RETURN_IF_ERROR(RunStandalone(run, std::cout));                 // exit 1
//
// Ranks find each other on one machine: Gloo listens on 127.0.0.1.
#ifndef CHIMERA_WORKER_STANDALONE_STANDALONE_H_
#define CHIMERA_WORKER_STANDALONE_STANDALONE_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "schedule/program.h"
#include "schedule/schedule_params.h"
#include "worker/model/model_config.h"
#include "worker/runtime/task_runner.h"
#include "worker/runtime/task_spec.h"

namespace chimera::worker {

struct StandaloneFlags {
  std::string job_path;
  int rank = -1;
  int world = 0;
  // HOST:PORT of the rendezvous store; rank 0 serves it there.
  std::string store;
  // Steps to run; 0 runs spec.training.maxSteps.
  int64_t steps = 0;
  // Continue from the job's latest complete checkpoint, whatever partition
  // wrote it; without it a run starts at step 0 and replaces the job's
  // checkpoints.
  bool resume = false;
  // The CUDA device of a gpu job; -1 means the rank's own (the ranks of one
  // machine on GPUs 0, 1, ...).
  int gpu = -1;
  // A gpu job's transport: "nccl" (the default when empty) or "gloo", staged
  // through host memory, for ranks that share one GPU.
  std::string gpu_transport;
  // Where the job's data path and checkpoint directory lie (empty: the
  // current directory); see WorkerRoots.
  std::string data_root;
  std::string checkpoint_root;
  // The most any wait takes (the store, connecting, each transfer and
  // collective), in seconds; a peer that stopped is named once it passes.
  double timeout_seconds = absl::ToDoubleSeconds(kDefaultCollectiveTimeout);
};

struct StandaloneRun {
  TaskSpec spec;
  // The job's schedule, generated from `params` and validated.
  schedule::ScheduleParams params;
  schedule::Schedule schedule;
  int rank = 0;
  std::string store_host;
  int store_port = 0;
  // How a gpu job's ranks exchange tensors.
  GpuTransport gpu_transport = GpuTransport::kNccl;
  int64_t steps = 0;
  // Continue from the job's latest complete checkpoint; false: start at
  // step 0, deleting the job's checkpoints.
  bool resume = false;
  // The rank that prints the per-step lines.
  int reporting_rank = 0;
};

// What every rank derives from the job file and where it runs (its roots,
// GPU and timeout): the task's spec, the validated schedule, the steps
// (spec.training.maxSteps) and the reporting rank; rank and store are left
// unset. INVALID_ARGUMENT (NOT_FOUND for a missing job file) with one line
// per problem, each naming the job field. Benchmarks that run a job's
// pipeline themselves use it too.
absl::StatusOr<StandaloneRun> LoadStandaloneJob(const std::string& job_path,
                                                const TaskSite& site);

// Reads and checks everything: the flags, the job file, the schedule, and
// with --resume the checkpoint to start from. INVALID_ARGUMENT (NOT_FOUND for
// a missing job file, FAILED_PRECONDITION when --resume finds no complete
// checkpoint) with one line per problem, each naming the flag or job field.
absl::StatusOr<StandaloneRun> PrepareStandalone(const StandaloneFlags& flags);

// Joins the job and trains; on the reporting rank writes, per step,
//   step 3 loss 5.41209312734 step_seconds 0.0213 bubble_ratio 0.412
//   peak_memory_bytes 1834752
// (one line) where loss is the mini-batch's mean loss over all ranks,
// bubble_ratio the mean over ranks of bubble / step time, and step seconds and
// peak memory the reporting rank's own.
absl::Status RunStandalone(const StandaloneRun& run, std::ostream& out);

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_STANDALONE_STANDALONE_H_
