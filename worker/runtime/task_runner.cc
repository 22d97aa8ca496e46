#include "worker/runtime/task_runner.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/comm/host_staged_communicator.h"
#include "worker/comm/tcp_rendezvous.h"
#ifdef CHIMERA_HAVE_NCCL
#include "worker/comm/nccl_communicator.h"
#endif
#include "worker/runtime/checkpoint.h"
#include "worker/runtime/compute_threads.h"
#include "worker/runtime/host_memory.h"
#include "worker/runtime/data_source.h"
#include "worker/runtime/device_memory.h"
#include "worker/runtime/gradient_sync.h"
#include "worker/runtime/message_tags.h"
#include "worker/runtime/program_executor.h"

namespace chimera::worker {
namespace {

absl::StatusOr<std::unique_ptr<Communicator>> ConnectGloo(
    const TaskRunOptions& options, const TcpRendezvous& rendezvous,
    std::vector<CommGroup> groups) {
  GlooOptions gloo;
  gloo.rank = options.rank;
  gloo.world_size = static_cast<int>(options.schedule.workers.size());
  gloo.groups = std::move(groups);
  gloo.host = options.host;
  gloo.timeout = options.timeout;
  return CreateGlooCommunicator(rendezvous, gloo);
}

// Gloo for CPU tasks; NCCL for GPU tasks, or Gloo staged through host memory
// where asked; each with the job's gradient groups and the caller's extra
// groups.
absl::StatusOr<std::unique_ptr<Communicator>> Connect(
    const TaskRunOptions& options, const TcpRendezvous& rendezvous) {
  std::vector<CommGroup> groups = GradientGroups(options.schedule);
  groups.insert(groups.end(), options.extra_groups.begin(),
                options.extra_groups.end());
  if (!options.task.gpu)
    return ConnectGloo(options, rendezvous, std::move(groups));
  if (options.gpu_transport == GpuTransport::kHostStagedGloo) {
    ASSIGN_OR_RETURN(std::unique_ptr<Communicator> gloo,
                     ConnectGloo(options, rendezvous, std::move(groups)));
    return StageThroughHost(std::move(gloo));
  }
#ifdef CHIMERA_HAVE_NCCL
  NcclOptions nccl;
  nccl.rank = options.rank;
  nccl.world_size = static_cast<int>(options.schedule.workers.size());
  nccl.device = options.gpu_index;
  nccl.groups = std::move(groups);
  nccl.links = P2pLinks(options.schedule);
  nccl.connect_timeout = options.timeout;
  return CreateNcclCommunicator(rendezvous, nccl);
#else
  return absl::FailedPreconditionError(
      "a gpu task needs NCCL, and this worker was built without it");
#endif
}

}  // namespace

absl::Status RunTask(const TaskRunOptions& options, TaskObserver& observer) {
  LimitComputeThreads(options.task.threads);
  RetainFreedHostMemory();
  const ExecutorOptions executor_options =
      ExecutorOptionsFor(options.task, options.gpu_index);
  // Before the rendezvous: the other ranks need not wait to learn this.
  RETURN_IF_ERROR(CheckDeviceUsable(executor_options.device));
  const CheckpointDir checkpoints(options.task.checkpoint_dir,
                                  options.attempt);
  if (!options.task.checkpoint_dir.empty()) {
    // Before the rendezvous, so that no rank can have written a step of its
    // own yet: what lies past the first step is from an attempt that failed,
    // whose tasks (if any still run) may write no more.
    RETURN_IF_ERROR(checkpoints.Claim());
    RETURN_IF_ERROR(checkpoints.RemoveStepsAfter(options.first_step));
  }
  const int world = static_cast<int>(options.schedule.workers.size());
  std::unique_ptr<TcpRendezvous> rendezvous;
  if (options.rank == 0) {
    ASSIGN_OR_RETURN(
        rendezvous, TcpRendezvous::Host(options.host, options.store_port, world,
                                        options.timeout));
    observer.OnStoreReady(absl::StrCat(options.host, ":", rendezvous->port()));
  } else {
    ASSIGN_OR_RETURN(rendezvous,
                     TcpRendezvous::Join(options.store_host, options.store_port,
                                         options.timeout));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                   Connect(options, *rendezvous));
  ASSIGN_OR_RETURN(std::unique_ptr<DataSource> data,
                   DataSource::Open(options.task.data));

  ASSIGN_OR_RETURN(
      std::unique_ptr<ProgramExecutor> executor,
      ProgramExecutor::Create(options.schedule, options.rank, executor_options,
                              *data, comm.get()));
  if (options.first_step > 0) {
    if (options.task.checkpoint_dir.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the task starts at step ", options.first_step,
                       " but the job has no checkpoints "
                       "(spec.training.checkpointEvery is 0)"));
    }
    RETURN_IF_ERROR(checkpoints.Load(*executor, options.first_step));
  }
  const std::vector<int> written =
      StagesWrittenBy(options.schedule, options.rank);
  const int64_t every = options.task.checkpoint_every;
  for (int64_t step = options.first_step; step < options.last_step; ++step) {
    ASSIGN_OR_RETURN(StepMetrics metrics, executor->RunStep(step));
    // After the optimizer step every replica of a stage is the same, so its
    // writer alone saves it.
    if (every > 0 && (step + 1) % every == 0) {
      RETURN_IF_ERROR(checkpoints.Save(*executor, step + 1, written));
      metrics.checkpoint_step = step + 1;
      // Every rank saved step + 1 - every before it could start this step,
      // so that one is complete and anything older is superseded. Keeping
      // two covers a crash before this one is complete.
      if (const absl::Status pruned =
              checkpoints.RemoveStepsBefore(step + 1 - every);
          !pruned.ok()) {
        CHIMERA_LOG(WARNING) << "rank " << options.rank << ": " << pruned;
      }
    }
    RETURN_IF_ERROR(observer.OnStep(metrics, *comm));
  }
  return comm->Barrier(options.timeout);
}

}  // namespace chimera::worker
