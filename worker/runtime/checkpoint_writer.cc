#include "worker/runtime/checkpoint_writer.h"

#include <sched.h>

#include <chrono>
#include <utility>

#include "common/logging.h"
#include "common/status_macros.h"

namespace chimera::worker {
namespace {

// Lets the ranks' compute come first: this thread then runs only on a core
// that would otherwise idle. On a host whose ranks share its cores, a
// checkpoint's work would otherwise slow every step; where no core is ever
// idle, the optimizer update that waits for the read frees one. Best
// effort: where the scheduler refuses, the write competes like any thread.
void RunOnlyWhenIdle() {
#ifdef SCHED_IDLE
  sched_param unused{};
  sched_setscheduler(/*this thread*/ 0, SCHED_IDLE, &unused);
#endif
}

}  // namespace

CheckpointWriter::CheckpointWriter(const CheckpointDir* checkpoints,
                                   int64_t num_layers, int rank)
    : checkpoints_(*checkpoints), num_layers_(num_layers), rank_(rank) {}

CheckpointWriter::~CheckpointWriter() {
  if (const absl::Status flushed = Flush(); !flushed.ok()) {
    CHIMERA_LOG(WARNING) << "rank " << rank_ << ": " << flushed;
  }
}

absl::StatusOr<std::shared_future<void>> CheckpointWriter::Submit(
    int64_t step, std::vector<StageView> stages) {
  RETURN_IF_ERROR(Flush());
  std::promise<void> read;
  std::shared_future<void> stages_read = read.get_future().share();
  in_flight_ =
      std::async(std::launch::async, [this, step, stages = std::move(stages),
                                      read = std::move(read)]() mutable {
        return Write(step, std::move(stages), std::move(read));
      });
  return stages_read;
}

absl::Status CheckpointWriter::Check() {
  if (!in_flight_.valid() || in_flight_.wait_for(std::chrono::seconds(0)) !=
                                 std::future_status::ready) {
    return absl::OkStatus();
  }
  return in_flight_.get();
}

absl::Status CheckpointWriter::Flush() {
  if (!in_flight_.valid()) return absl::OkStatus();
  return in_flight_.get();
}

absl::Status CheckpointWriter::Write(int64_t step,
                                     std::vector<StageView> stages,
                                     std::promise<void> read) {
  RunOnlyWhenIdle();
  absl::StatusOr<std::vector<SerializedStage>> serialized = Serialize(stages);
  stages.clear();
  read.set_value();
  RETURN_IF_ERROR(serialized.status());
  RETURN_IF_ERROR(checkpoints_.Write(step, *serialized));
  durable_step_.store(step);
  // Whichever rank completes the step prunes what it supersedes; the others
  // find it incomplete and leave everything.
  if (const absl::Status pruned = checkpoints_.Prune(num_layers_);
      !pruned.ok()) {
    CHIMERA_LOG(WARNING) << "rank " << rank_ << ": " << pruned;
  }
  return absl::OkStatus();
}

}  // namespace chimera::worker
