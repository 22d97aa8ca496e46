// Checkpoints of a job's model stages: each stage's parameters and optimizer
// state, saved exactly (the tensors' bytes, torch.save's format), so a job
// restarted from a checkpoint trains on as if it had never stopped.
//
// Layout, under the job's own directory (spec.training.checkpointDir/<job>):
//   step-<S>/stage-<K>.pt   model stage K after S optimizer steps
// A stage file is written under a temporary name and renamed into place, so
// that it exists only once it is whole: the rename is the stage's "done"
// marker, and step S is complete when every model stage's file exists. Each
// model stage is written by one rank only, the lowest that holds a replica
// of it (after an optimizer step all replicas are identical); every rank
// loads the stages it holds.
//
//   CheckpointDir checkpoints(options.task.checkpoint_dir);
//   // after step s, when (s + 1) % every == 0:
//   RETURN_IF_ERROR(checkpoints.Save(*executor, s + 1,
//                                    StagesWrittenBy(schedule, rank)));
//   // before the first step of a restarted task:
//   RETURN_IF_ERROR(checkpoints.Load(*executor, start_step, num_model_stages));
#ifndef CHIMERA_WORKER_RUNTIME_CHECKPOINT_H_
#define CHIMERA_WORKER_RUNTIME_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/schedule/program.h"

namespace chimera::worker {

class ProgramExecutor;

// The model stages `rank` writes in a checkpoint: those of which it is the
// lowest rank holding a replica. Every model stage has exactly one writer.
std::vector<int> StagesWrittenBy(const schedule::Schedule& schedule, int rank);

class CheckpointDir {
 public:
  // `root`: the job's own checkpoint directory (created on the first save).
  explicit CheckpointDir(std::string root);

  std::string StepPath(int64_t step) const;
  std::string StagePath(int64_t step, int model_stage) const;

  // Whether all `num_model_stages` stage files of `step` exist.
  bool IsComplete(int64_t step, int num_model_stages) const;

  // Writes the model stages `model_stages` of `executor` as checkpoint
  // `step` (the optimizer steps done). Call between steps. INTERNAL naming
  // the path when a file cannot be written; NOT_FOUND for a stage the
  // executor does not hold.
  absl::Status Save(const ProgramExecutor& executor, int64_t step,
                    const std::vector<int>& model_stages) const;

  // Restores every model stage `executor` holds from checkpoint `step`.
  // FAILED_PRECONDITION naming the missing file when the step is not
  // complete (then nothing is loaded); INVALID_ARGUMENT naming the path when
  // a file is unreadable or does not fit the executor's model.
  absl::Status Load(ProgramExecutor& executor, int64_t step, int num_model_stages) const;

 private:
  // The first of the step's stage files that does not exist; empty when
  // every one does.
  std::string MissingStagePath(int64_t step, int num_model_stages) const;

  const std::string root_;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_CHECKPOINT_H_
