// RunTask: one rank of one training task, from rendezvous to the last step.
// Rank 0 hosts the rendezvous store (on an ephemeral port unless one is
// given) and announces it; the others join it; every rank then builds its
// communicator (Gloo, or NCCL for a gpu task) with the schedule's gradient
// groups, opens the data,
// builds its executor and runs the steps, telling an observer about each.
// Where the job takes checkpoints, rank 0 claims the job's directory for its
// attempt before it hosts the store and chooses the first step: the latest
// complete checkpoint on disk (checkpoint.h), which it publishes in the
// store with its claim; every other rank checks that it sees that claim (the
// checkpoint roots are one shared file system) and all load that step.
// Every spec.training.checkpointEvery steps each rank writes the model
// stages it is the writer of, then prunes what the last two complete
// checkpoints supersede. Standalone mode and the daemon's task process
// differ only in their observers.
//
//   class Printer : public TaskObserver { ... };
//   Printer printer;
//   RETURN_IF_ERROR(RunTask(options, printer));
#ifndef CHIMERA_WORKER_RUNTIME_TASK_RUNNER_H_
#define CHIMERA_WORKER_RUNTIME_TASK_RUNNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "schedule/rank_schedule.h"
#include "worker/comm/communicator.h"
#include "worker/runtime/step_metrics.h"
#include "worker/runtime/task_spec.h"

namespace chimera::worker {

enum class GpuTransport { kNccl, kHostStagedGloo };

// One run of a task: what it computes (the spec, this rank's share of the
// schedule) and how this run meets the other ranks and where it starts.
struct TaskRunOptions {
  TaskSpec spec;
  // This rank's program and the outline of the whole schedule.
  schedule::RankSchedule schedule;
  // A gpu task's transport: NCCL, or Gloo staged through host memory for
  // ranks that share one GPU (NCCL refuses two ranks on one device).
  GpuTransport gpu_transport = GpuTransport::kNccl;
  // This host as the other ranks reach it (Gloo and, on rank 0, the store).
  std::string host = "127.0.0.1";
  // Where rank 0 serves the store: rank 0 binds store_port (0: any free
  // port); the others join store_host:store_port.
  std::string store_host = "127.0.0.1";
  int store_port = 0;
  // Runs steps [first, last_step), where first is the latest complete
  // checkpoint in spec.checkpoints.dir (0 when there is none or the job takes
  // no checkpoints), or 0 after deleting every checkpoint when `start_over`.
  bool start_over = false;
  int64_t last_step = 0;
  // The checkpoint the coordinator last saw complete (0: none). The disk
  // decides; a first step before it means checkpoints were lost, which is
  // logged.
  int64_t recorded_checkpoint_step = 0;
  // The coordinator's attempt of the job (0 without one): checkpoints of an
  // earlier attempt's tasks are fenced off (CheckpointDir::Claim).
  int64_t attempt = 0;
  // The shared memory segment (OpPositionBoard::kBytes) where the executor
  // publishes its position for the worker's daemon; empty: none.
  std::string position_segment;
  // Groups beyond the gradient groups (e.g. all ranks, for summaries).
  std::vector<CommGroup> extra_groups;
};

class TaskObserver {
 public:
  virtual ~TaskObserver() = default;
  // Rank 0 only: the store is up at host:port, and every rank starts at
  // `first_step`.
  virtual void OnStoreReady(const std::string& address, int64_t first_step) {}
  // After every step; an error ends the task with it.
  virtual absl::Status OnStep(const StepMetrics& metrics,
                              Communicator& comm) = 0;
};

absl::Status RunTask(const TaskRunOptions& options, TaskObserver& observer);

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_TASK_RUNNER_H_
