// Everything a worker needs to run one task, read from the job's validated
// spec (model, data, optimizer, seed) and the plan it runs (schedule
// parameters, micro-batch size, layers of every model stage). The daemon
// gets the plan from the coordinator; standalone mode derives it from a job
// that fixes its parallelism.
//
//   ASSIGN_OR_RETURN(TaskOptions options,
//                    TaskOptionsFor(job, plan, rank, roots, job_id));
//   ASSIGN_OR_RETURN(schedule::Schedule s,
//                    schedule::GenerateSchedule(options.schedule));
#ifndef CHIMERA_WORKER_RUNTIME_TASK_OPTIONS_H_
#define CHIMERA_WORKER_RUNTIME_TASK_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chimera/v1/job.pb.h"
#include "chimera/v1/plan.pb.h"
#include "schedule/schedule_params.h"
#include "worker/model/model_config.h"
#include "worker/runtime/data_source.h"
#include "worker/runtime/optimizer.h"
#include "worker/runtime/program_executor.h"

namespace chimera::worker {

struct TaskOptions {
  schedule::ScheduleParams schedule;
  ModelConfig model;
  // Layers of each model stage, from the plan's partition.
  std::vector<LayerRange> partition;
  DataSourceOptions data;
  OptimizerConfig optimizer;
  uint64_t seed = 0;
  int micro_batch_size = 1;
  int64_t max_steps = 0;
  // Compute threads of the task's rank: LibTorch's pools and the BLAS's
  // (ThreadsPerWorker).
  int threads = 1;
  // spec.resources.device is "gpu": the stages compute on a CUDA GPU and the
  // ranks talk over NCCL (Gloo and the CPU otherwise).
  bool gpu = false;
  // Save a checkpoint every this many steps (0: never) in this job's own
  // directory <spec.training.checkpointDir>/<job id>, checkpoint_dir,
  // relative to checkpoint_root (the worker's --checkpoint-root), beneath
  // which it is opened (common/directory.h).
  int64_t checkpoint_every = 0;
  std::string checkpoint_root;
  std::string checkpoint_dir;
};

// Where a job's files may be on this worker (common/root_path.h): its
// spec.data.path is read under `data` and its checkpoints are written under
// `checkpoints`, both canonical (chimera-worker --data-root,
// --checkpoint-root).
struct WorkerRoots {
  std::string data;
  std::string checkpoints;
};

// The roots of the --data-root and --checkpoint-root flags; an empty one is
// the current directory. INVALID_ARGUMENT naming the flag when one is not an
// existing directory.
absl::StatusOr<WorkerRoots> WorkerRootsFrom(absl::string_view data_root,
                                            absl::string_view checkpoint_root);

// Whether this build can run gpu tasks: LibTorch with CUDA, and NCCL.
#if defined(CHIMERA_TORCH_CUDA) && defined(CHIMERA_HAVE_NCCL)
inline constexpr bool kWorkerHasGpuRuntime = true;
#else
inline constexpr bool kWorkerHasGpuRuntime = false;
#endif

// Compute threads of a worker that shares its host with `workers_on_host`
// workers of its job (itself included): spec.resources.threadsPerWorker, or
// when it is 0 an equal share of the host's cores (at least 1), so that the
// job's threads add up to at most the cores; never more than the host's cores
// (more only slows every pool down, and thousands exhaust the process table).
int ThreadsPerWorker(const chimera::v1::ResourceSpec& resources,
                     int workers_on_host);

// The ranks of `plan` placed on the node of `rank`, itself included; all
// `world` ranks when the plan places none (a standalone job, whose ranks are
// taken to share one host).
int WorkersSharingHost(const chimera::v1::Plan& plan, int rank, int world);

// `job` must have passed jobspec validation; its paths are resolved under
// `roots`, and `job_id` names its own checkpoint directory: the
// coordinator's job id (unique, kept across restarts) or, without a
// coordinator, the job's name. INVALID_ARGUMENT, one line per problem naming
// the field: a plan that is not a valid schedule or whose partition does not
// cover the model, or a gpu job on a worker without the GPU runtime
// (kWorkerHasGpuRuntime), or a path that a symbolic link leads out of its
// root.
absl::StatusOr<TaskOptions> TaskOptionsFor(const chimera::v1::TrainJob& job,
                                           const chimera::v1::Plan& plan,
                                           int rank, const WorkerRoots& roots,
                                           absl::string_view job_id);

// The model of a validated job's spec.model (defaults filled in: FFN
// 4 x hidden, vocabulary 256).
absl::StatusOr<ModelConfig> ModelConfigFor(const chimera::v1::ModelSpec& spec);

// The optimizer of a validated job's spec.training.optimizer (AdamW's
// betas and eps defaulted where left open).
OptimizerConfig OptimizerConfigFor(const chimera::v1::OptimizerSpec& spec);

// The executor's options for `task`, every transfer and collective waiting
// at most `timeout` (the job's: a stopped peer is named within it); a gpu
// task computes on CUDA device `gpu_index`.
ExecutorOptions ExecutorOptionsFor(const TaskOptions& task, int gpu_index,
                                   absl::Duration timeout);

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_TASK_OPTIONS_H_
