#include "worker/runtime/checkpoint_writer.h"

#include <chrono>
#include <utility>

#include "common/logging.h"
#include "common/status_macros.h"

namespace chimera::worker {

CheckpointWriter::CheckpointWriter(const CheckpointDir* checkpoints,
                                   int64_t num_layers, int rank)
    : checkpoints_(*checkpoints), num_layers_(num_layers), rank_(rank) {}

CheckpointWriter::~CheckpointWriter() {
  if (const absl::Status flushed = Flush(); !flushed.ok()) {
    CHIMERA_LOG(WARNING) << "rank " << rank_ << ": " << flushed;
  }
}

absl::Status CheckpointWriter::Submit(int64_t step,
                                      std::vector<StageSnapshot> stages) {
  RETURN_IF_ERROR(Flush());
  in_flight_ = std::async(
      std::launch::async,
      [this, step, stages = std::move(stages)] { return Write(step, stages); });
  return absl::OkStatus();
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
                                     const std::vector<StageSnapshot>& stages) {
  RETURN_IF_ERROR(checkpoints_.Write(step, stages));
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
