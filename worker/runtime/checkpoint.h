// Checkpoints of a job's model stages: each stage's parameters and optimizer
// state, saved exactly (the tensors' bytes, torch.save's format), so a job
// restarted from a checkpoint trains on as if it had never stopped, also
// when it restarts with another partition of the model (a new plan).
//
// Layout, under the job's own directory (spec.training.checkpointDir/<job>):
//   attempt                      "<attempt> <claim token>" of the last claim
//   step-<S>/blocks-<B>-<E>.pt   blocks [B, E) after S optimizer steps
//   step-<S>/blocks-<B>-<E>.part-<I>-of-<G>.pt   part I of G of them
// A file holds one model stage, named by its transformer blocks (the first
// stage also holds the embedding, the last the final norm and head), so any
// partition can find its parameters in the files of any other; where the
// stage's optimizer state is sharded over G ranks, each writes its part
// (stage_file.h says what each file holds). A file is written under a
// temporary name, synced and renamed into place, so that it exists only once
// it is whole and durable. Whether step S is complete is decided from the
// files alone: its stages' blocks tile the model, each with all its parts.
// Without sharding, each model stage is written by one rank only, the lowest
// that holds a replica of it (after an optimizer step all replicas are
// identical); every rank loads the stages it holds, under any partition and
// sharding.
//
// The guarantees (docs/operations.md#checkpoints-and-restarts):
//   - a resume starts from the latest complete step on disk and deletes
//     nothing;
//   - a complete step is deleted only once two newer steps are complete
//     (the directory keeps the last two), together with the incomplete steps
//     older than the latest complete one;
//   - attempts are fenced: the coordinator may restart a job (attempt A + 1)
//     while tasks of attempt A still run, e.g. after the coordinator itself
//     restarted. Rank 0 of each attempt claims the directory first; from then
//     on Save and Prune of an earlier attempt are refused, so it can neither
//     prune what the new attempt resumes from nor write past it. A file an
//     earlier attempt's task still managed to write into a step the new
//     attempt writes, under another partition, is replaced by Save.
//
//   ASSIGN_OR_RETURN(CheckpointDir checkpoints,
//                    CheckpointDir::Open(root, "ckpt/job-1", attempt));
//   // rank 0, before the first step:
//   ASSIGN_OR_RETURN(std::string claim, checkpoints.Claim());
//   const int64_t first = checkpoints.LatestComplete(num_layers).value_or(0);
//   // every other rank, told `claim` and `first` by rank 0:
//   RETURN_IF_ERROR(checkpoints.CheckClaim(claim));
//   // every rank:
//   if (first > 0) RETURN_IF_ERROR(checkpoints.Load(*executor, first));
//   // after step s, when (s + 1) % every == 0 (or, in the background,
//   // CheckpointWriter with the StageViews of the step):
//   RETURN_IF_ERROR(checkpoints.Save(
//       *executor, s + 1, StagesWrittenBy(outline, rank, spec.sharding)));
//   RETURN_IF_ERROR(checkpoints.Prune(num_layers));
#ifndef CHIMERA_WORKER_RUNTIME_CHECKPOINT_H_
#define CHIMERA_WORKER_RUNTIME_CHECKPOINT_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/directory.h"
#include "schedule/rank_schedule.h"
#include "worker/model/model_config.h"
#include "worker/runtime/program_executor.h"
#include "worker/runtime/stage_file.h"
#include "worker/runtime/task_spec.h"

namespace chimera::worker {

// The model stages `rank` writes (its part of) in a checkpoint. Without
// sharding, those of which it is the lowest rank holding a replica: every
// model stage has exactly one writer. With sharding, every stage it holds:
// each member of a stage's group writes its part.
std::vector<int> StagesWrittenBy(const schedule::ScheduleOutline& outline,
                                 int rank, schedule::Sharding sharding);

// What a rank's checkpoint file holds of one model stage: its blocks, and
// its part of the stage's parameters and optimizer state as the executor
// holds them (the tensors are shared, not copied).
struct StageView {
  LayerRange blocks;
  StagePart state;
};

// The model stages `model_stages` of `executor`, as they are between two
// steps. They stay so until the executor's next optimizer step: a reader on
// another thread makes it wait (ProgramExecutor::DeferUpdatesUntil). NOT_FOUND
// for a stage the executor does not hold.
absl::StatusOr<std::vector<StageView>> StageViews(
    const ProgramExecutor& executor, const std::vector<int>& model_stages);

// A model stage's file, serialised in host memory: what a checkpoint keeps
// of a StageView once its tensors may change again.
struct SerializedStage {
  StageFileId file;
  std::vector<char> bytes;
};

// `stages` in the stage files' format (a GPU's tensors are copied to the
// host). INTERNAL naming the stage's file when one cannot be serialised.
absl::StatusOr<std::vector<SerializedStage>> Serialize(
    const std::vector<StageView>& stages);

class CheckpointDir {
 public:
  // The job's checkpoint directory `path` beneath `root` (see Directory:
  // no symbolic link leads out of the root, now or later), created when
  // `create`; `attempt`: the job attempt that writes (0 for a run without a
  // coordinator). NOT_FOUND when it does not exist and is not created.
  static absl::StatusOr<CheckpointDir> Open(const Directory& root,
                                            absl::string_view path,
                                            int64_t attempt, bool create);

  // Claims the directory for this attempt and returns the claim's token,
  // which tells this claim apart from any other. ABORTED when a later
  // attempt already has; the write's error naming the file otherwise.
  absl::StatusOr<std::string> Claim() const;
  // OK when the directory's last claim is this attempt's with `token`:
  // this process sees the directory the claiming rank wrote to. ABORTED
  // when a later attempt has claimed it; FAILED_PRECONDITION when it holds
  // another claim or none (the ranks' checkpoint roots are not one shared
  // file system).
  absl::Status CheckClaim(absl::string_view token) const;

  // OK when the files of `step` tile blocks [0, num_layers); otherwise
  // FAILED_PRECONDITION saying which blocks are missing or overlap.
  absl::Status CheckComplete(int64_t step, int64_t num_layers) const;

  // The latest step whose checkpoint is complete; nullopt when none is.
  std::optional<int64_t> LatestComplete(int64_t num_layers) const;

  // Writes `stages` as checkpoint `step` (the optimizer steps done),
  // replacing any file of the step that holds some of their blocks under
  // another partition. Needs no executor: it may run while one trains on.
  // An empty `stages` writes nothing.
  // RESOURCE_EXHAUSTED when the disk is full, INTERNAL naming the file when
  // it cannot be written otherwise (no temporary file is left either way);
  // ABORTED once a later attempt has claimed the directory (then nothing is
  // written).
  absl::Status Write(int64_t step,
                     const std::vector<SerializedStage>& stages) const;
  // Write(step, Serialize(StageViews(executor, model_stages))): call between
  // steps.
  absl::Status Save(const ProgramExecutor& executor, int64_t step,
                    const std::vector<int>& model_stages) const;

  // Restores every model stage `executor` holds from checkpoint `step`,
  // whatever partition wrote it. FAILED_PRECONDITION when the step is not
  // complete (then nothing is loaded); INVALID_ARGUMENT naming the file when
  // it is unreadable or does not fit the executor's model.
  absl::Status Load(ProgramExecutor& executor, int64_t step) const;

  // Every parameter of the whole model at checkpoint `step`, by name, in
  // the order of the blocks, those saved in pieces (sharding full) last (no
  // optimizer state), each once (a tied embedding's weight is in two
  // stages' files): what an export writes.
  // FAILED_PRECONDITION when the step is not complete for `num_layers`
  // blocks; INVALID_ARGUMENT naming the file when one is unreadable.
  absl::StatusOr<std::vector<std::pair<std::string, at::Tensor>>> Parameters(
      int64_t step, int64_t num_layers) const;

  // Deletes the steps the last two complete ones supersede: every step
  // older than the latest complete one except the complete one before it.
  // Steps after the latest complete one (being written) stay. INTERNAL
  // naming the step when one cannot be deleted; ABORTED, deleting nothing,
  // once a later attempt has claimed the directory.
  absl::Status Prune(int64_t num_layers) const;

  // Removes every step (a run that starts over, without a coordinator).
  // Errors as Prune's.
  absl::Status RemoveAllSteps() const;

  // The steps that have a directory, in increasing order.
  std::vector<int64_t> Steps() const;
  // The directory's path relative to the root, for messages.
  const std::string& path() const { return directory_.path(); }

 private:
  CheckpointDir(Directory directory, int64_t attempt);

  struct StageFile {
    StageFileId id;
    std::string name;
  };
  // The finished stage files of `step`, by blocks, then part.
  std::vector<StageFile> StageFiles(int64_t step) const;
  // The model stages a step's `files` (StageFiles' order) save: their
  // blocks, how many parts each saving has (0 when the files are parts of
  // savings with different numbers of parts) and the parts present.
  struct SavedStage {
    LayerRange blocks;
    int parts = 1;
    std::set<int> present;
  };
  static std::vector<SavedStage> SavedStages(
      const std::vector<StageFile>& files);
  // The last claim: attempt 0 and no token when none was made.
  struct ClaimRecord {
    int64_t attempt = 0;
    std::string token;
  };
  absl::StatusOr<ClaimRecord> LastClaim() const;
  // ABORTED when a later attempt than this one has claimed the directory.
  absl::Status CheckNotSuperseded() const;
  absl::Status RemoveSteps(const std::vector<int64_t>& steps) const;

  Directory directory_;
  int64_t attempt_;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_CHECKPOINT_H_
