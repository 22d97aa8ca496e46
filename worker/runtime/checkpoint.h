// Checkpoints of a job's model stages: each stage's parameters and optimizer
// state, saved exactly (the tensors' bytes, torch.save's format), so a job
// restarted from a checkpoint trains on as if it had never stopped, also
// when it restarts with another partition of the model (a new plan).
//
// Layout, under the job's own directory (spec.training.checkpointDir/<job>):
//   step-<S>/blocks-<B>-<E>.pt   blocks [B, E) after S optimizer steps
// A file holds one model stage, named by its transformer blocks (the first
// stage also holds the embedding, the last the final norm and head), so any
// partition can find its parameters in the files of any other. A file is
// written under a temporary name, synced and renamed into place, so that it
// exists only once it is whole and durable; step S is complete when its
// files' blocks tile the model. Each model stage is written by one rank only,
// the lowest that holds a replica of it (after an optimizer step all
// replicas are identical); every rank loads the stages it holds.
//
// Attempts are fenced: the coordinator may restart a job (attempt A + 1)
// while tasks of attempt A still run, e.g. after the coordinator itself
// restarted. Each attempt claims the directory first (Claim writes its
// number to `attempt`); from then on Save and the Remove* calls of an
// earlier attempt are refused, so it can neither prune the checkpoint the
// new attempt resumes from nor write steps past it.
//
//   CheckpointDir checkpoints(options.task.checkpoint_dir, attempt);
//   // before the first step of a task that starts at step s0:
//   RETURN_IF_ERROR(checkpoints.Claim());
//   RETURN_IF_ERROR(checkpoints.RemoveStepsAfter(s0));
//   if (s0 > 0) RETURN_IF_ERROR(checkpoints.Load(*executor, s0));
//   // after step s, when (s + 1) % every == 0:
//   RETURN_IF_ERROR(checkpoints.Save(*executor, s + 1,
//                                    StagesWrittenBy(schedule, rank)));
//   checkpoints.RemoveStepsBefore(s + 1 - every);
#ifndef CHIMERA_WORKER_RUNTIME_CHECKPOINT_H_
#define CHIMERA_WORKER_RUNTIME_CHECKPOINT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "schedule/program.h"
#include "worker/model/model_config.h"

namespace chimera::worker {

class ProgramExecutor;

// The model stages `rank` writes in a checkpoint: those of which it is the
// lowest rank holding a replica. Every model stage has exactly one writer.
std::vector<int> StagesWrittenBy(const schedule::Schedule& schedule, int rank);

class CheckpointDir {
 public:
  // `root`: the job's own checkpoint directory (created by Claim or the
  // first save); `attempt`: the job attempt that writes (0 for a run
  // without a coordinator).
  explicit CheckpointDir(std::string root, int64_t attempt = 0);

  // Claims the directory for this attempt. ABORTED when a later attempt
  // already has; INTERNAL naming the path when it cannot be written.
  absl::Status Claim() const;

  std::string StepPath(int64_t step) const;
  std::string StagePath(int64_t step, LayerRange blocks) const;

  // OK when the files of `step` tile blocks [0, num_layers); otherwise
  // FAILED_PRECONDITION saying which blocks are missing or overlap.
  absl::Status CheckComplete(int64_t step, int64_t num_layers) const;

  // The latest step whose checkpoint is complete; nullopt when none is.
  std::optional<int64_t> LatestComplete(int64_t num_layers) const;

  // Writes the model stages `model_stages` of `executor` as checkpoint
  // `step` (the optimizer steps done). Call between steps. INTERNAL naming
  // the path when a file cannot be written; NOT_FOUND for a stage the
  // executor does not hold; ABORTED once a later attempt has claimed the
  // directory (then nothing is written).
  absl::Status Save(const ProgramExecutor& executor, int64_t step,
                    const std::vector<int>& model_stages) const;

  // Restores every model stage `executor` holds from checkpoint `step`,
  // whatever partition wrote it. FAILED_PRECONDITION when the step is not
  // complete (then nothing is loaded); INVALID_ARGUMENT naming the path when
  // a file is unreadable or does not fit the executor's model.
  absl::Status Load(ProgramExecutor& executor, int64_t step) const;

  // Deletes the checkpoints of steps before `step` (superseded: a later
  // one is complete), and of steps after `step` (left by an attempt that
  // failed after it; a restart from `step` writes them again, maybe with
  // another partition). INTERNAL naming the path when one cannot be
  // deleted; ABORTED, deleting nothing, once a later attempt has claimed
  // the directory.
  absl::Status RemoveStepsBefore(int64_t step) const;
  absl::Status RemoveStepsAfter(int64_t step) const;

 private:
  struct StageFile {
    LayerRange blocks;
    std::string path;
  };
  // The finished stage files of `step`, by first block.
  std::vector<StageFile> StageFiles(int64_t step) const;
  // The steps that have a directory.
  std::vector<int64_t> Steps() const;
  absl::Status RemoveStep(int64_t step) const;
  // ABORTED when a later attempt than this one has claimed the directory.
  absl::Status CheckNotSuperseded() const;
  // The attempt that claimed the directory last (0 when none has).
  absl::StatusOr<int64_t> ClaimedAttempt() const;

  const std::string root_;
  const int64_t attempt_;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_CHECKPOINT_H_
