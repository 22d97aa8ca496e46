// Everything a worker needs to run one task, read once from the job's
// validated spec (model, data, optimizer, seed), the plan it runs
// (micro-batch size, layers of every model stage) and where it runs (the
// worker's roots, its GPU, the job's timeout): the daemon's task process and
// standalone mode build it at their boundary, and the runner and the
// executor read it, never copy parts of it into options of their own.
//
//   ASSIGN_OR_RETURN(const TaskSpec spec,
//                    TaskSpecFor(job, plan, rank, job_id, site));
//   ASSIGN_OR_RETURN(auto executor, ProgramExecutor::Create(
//                        rank_schedule, spec, *data, comm.get()));
#ifndef CHIMERA_WORKER_RUNTIME_TASK_SPEC_H_
#define CHIMERA_WORKER_RUNTIME_TASK_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "c10/core/Device.h"
#include "chimera/v1/job.pb.h"
#include "chimera/v1/plan.pb.h"
#include "common/directory.h"
#include "schedule/schedule_params.h"
#include "worker/comm/communicator.h"
#include "worker/model/model_config.h"
#include "worker/model/partition.h"
#include "worker/runtime/data_source.h"
#include "worker/runtime/optimizer.h"

namespace chimera::worker {

// The most each kind of wait takes; a peer that stopped is named once its
// wait passes.
struct Timeouts {
  // Joining the store, connecting the groups, the barrier at the end.
  absl::Duration rendezvous = kDefaultCollectiveTimeout;
  // Each receive, and the wait for each send at the end of a step.
  absl::Duration transfer = kDefaultP2pTimeout;
  // Each ALLREDUCE_END.
  absl::Duration collective = kDefaultCollectiveTimeout;

  // Every wait bounded by `timeout` (the job's).
  static Timeouts Every(absl::Duration timeout) {
    return {timeout, timeout, timeout};
  }
};

// Save a checkpoint every `every` steps (0: never) in the job's own
// directory `dir` (<spec.training.checkpointDir>/<job id>), relative to
// `root` (the worker's --checkpoint-root), beneath which it is opened
// (common/directory.h).
struct CheckpointSpec {
  int64_t every = 0;
  std::string root;
  std::string dir;
};

// A file or directory named relative to a root directory, opened beneath it
// (Directory::OpenFile, Directory::Open), so that no link swapped in after
// the job was checked can lead out of the root.
struct FileUnderRoot {
  std::string root;
  std::string path;
};

// The directory of a torchscript model's pieces (TaskSpec::modules,
// ProfileOptions::modules), opened beneath its root. INVALID_ARGUMENT when
// there is none; the errors of Directory::Open otherwise.
absl::StatusOr<Directory> OpenModules(
    const std::optional<FileUnderRoot>& modules);

struct TaskSpec {
  ModelConfig model;
  // Layers of each model stage, from the plan.
  Partition partition;
  // Where the stages compute: the CPU, or for a gpu job (spec.resources.
  // device) one CUDA GPU; its ranks then talk over NCCL (Gloo otherwise).
  c10::Device device = c10::Device(c10::DeviceType::CPU);
  DataSourceOptions data;
  OptimizerConfig optimizer;
  // What each gradient group shards (sharded_optimizer.h).
  schedule::Sharding sharding = schedule::Sharding::kNone;
  // Parameter initialisation and the data's sample keys.
  uint64_t seed = 0;
  // The weights a job that does not resume starts from (spec.model.
  // initFrom's model.safetensors beneath the data root); nullopt:
  // initialised from `seed`.
  std::optional<FileUnderRoot> init_from;
  // A torchscript model's pieces (spec.model.modules, a directory beneath
  // the data root); nullopt for the other families.
  std::optional<FileUnderRoot> modules;
  // Samples per micro-batch the program names (B; with replicated stages a
  // slice, B over Topology::SlicesPerMicroBatch), at least the number of
  // parts any backward is split into.
  int micro_batch_size = 1;
  int64_t max_steps = 0;
  // Compute threads of the task's rank: LibTorch's pools and the BLAS's
  // (ThreadsPerWorker).
  int threads = 1;
  // How much lower than its host's busiest rank of the job this CPU rank
  // runs where they outnumber the host's cores (NiceIncrementOf,
  // cpu_priority.h); 0 for a GPU rank.
  int nice_increment = 0;
  CheckpointSpec checkpoints;
  Timeouts timeouts;

  bool gpu() const { return device.is_cuda(); }
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

// The ranks of `plan` placed on the node of `rank`, itself included, in
// increasing order; all `world` ranks when the plan places none (a
// standalone job, whose ranks are taken to share one host).
std::vector<int> RanksSharingHost(const chimera::v1::Plan& plan, int rank,
                                  int world);
// How many: RanksSharingHost(...).size().
int WorkersSharingHost(const chimera::v1::Plan& plan, int rank, int world);

// The nice increment of `rank`'s task (NiceIncrements) among the ranks
// sharing its host, each with `threads` compute threads on the host's
// `cores`, from the busy share of each (1 - its predicted bubble ratio,
// plan.prediction.rank_bubble_ratios): 0 for a plan without that
// prediction (a standalone job's).
int NiceIncrementOf(const chimera::v1::Plan& plan, int rank, int world,
                    int threads, int cores);

// Where a task runs on this worker.
struct TaskSite {
  WorkerRoots roots;
  // The CUDA device of a gpu task (ignored for cpu tasks).
  int gpu_index = 0;
  // The job's timeout, bounding every wait (Timeouts::Every).
  absl::Duration timeout = kDefaultCollectiveTimeout;
};

// `job` must have passed jobspec validation; its paths are resolved under
// `site.roots`, and `job_id` names its own checkpoint directory: the
// coordinator's job id (unique, kept across restarts) or, without a
// coordinator, the job's name. INVALID_ARGUMENT, one line per problem naming
// the field: a plan that is not a valid schedule or whose partition does not
// cover the model in as many stages as the schedule has, or a gpu job on a
// worker without the GPU runtime (kWorkerHasGpuRuntime), or a path that a
// symbolic link leads out of its root.
absl::StatusOr<TaskSpec> TaskSpecFor(const chimera::v1::TrainJob& job,
                                     const chimera::v1::Plan& plan, int rank,
                                     absl::string_view job_id,
                                     const TaskSite& site);

// The model of a validated job's spec.model (defaults filled in: FFN
// 4 x hidden, vocabulary 256).
ModelConfig ModelConfigFor(const chimera::v1::ModelSpec& spec);

// The optimizer of a validated job's spec.training.optimizer (AdamW's
// betas and eps defaulted where left open).
OptimizerConfig OptimizerConfigFor(const chimera::v1::OptimizerSpec& spec);

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_TASK_SPEC_H_
