// Writes a rank's shares of a job's checkpoints in the background, so that a
// step waits neither for a copy of its stages nor for the disk. A thread at
// idle priority, which runs only where the ranks leave a core free,
// serialises the stages as the step left them while the next step computes
// (that step's optimizer update waits for it: it would change them), then
// writes the files and prunes (CheckpointDir::Prune), as the synchronous
// Save and Prune would. One checkpoint is written at a time, in step order.
//
//   CheckpointWriter writer(&checkpoints, num_layers, rank);
//   after step s, when (s + 1) % every == 0:
//     ASSIGN_OR_RETURN(auto stages, StageViews(executor, written));
//     ASSIGN_OR_RETURN(auto read, writer.Submit(s + 1, std::move(stages)));
//     executor.DeferUpdatesUntil(read);
//   every step: RETURN_IF_ERROR(writer.Check());
//               metrics.checkpoint_step = writer.durable_step();
//   at the end: RETURN_IF_ERROR(writer.Flush());
#ifndef CHIMERA_WORKER_RUNTIME_CHECKPOINT_WRITER_H_
#define CHIMERA_WORKER_RUNTIME_CHECKPOINT_WRITER_H_

#include <atomic>
#include <cstdint>
#include <future>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/runtime/checkpoint.h"

namespace chimera::worker {

class CheckpointWriter {
 public:
  // Writes into `checkpoints`, which must outlive the writer, for `rank` of
  // a model of `num_layers` blocks.
  CheckpointWriter(const CheckpointDir* checkpoints, int64_t num_layers,
                   int rank);
  // Waits for the write in progress: none outlives the task.
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Starts writing `stages` as checkpoint `step` once the checkpoint before
  // it is written (waiting for it). Returns a future that is ready once
  // `stages` are read: their tensors must not change before. The error of
  // the write before, if it failed (CheckpointDir::Write's errors), and then
  // nothing is started.
  absl::StatusOr<std::shared_future<void>> Submit(
      int64_t step, std::vector<StageView> stages);
  // Without waiting: the error of a write that has failed, OK otherwise.
  absl::Status Check();
  // Waits for the write in progress; its error, if it failed.
  absl::Status Flush();
  // The latest checkpoint whose share this rank has written durably; 0
  // before the first.
  int64_t durable_step() const { return durable_step_.load(); }

 private:
  // Serialises `stages`, then says so through `read`, then writes them.
  absl::Status Write(int64_t step, std::vector<StageView> stages,
                     std::promise<void> read);

  const CheckpointDir& checkpoints_;
  const int64_t num_layers_;
  const int rank_;
  std::atomic<int64_t> durable_step_{0};
  // The write in progress, or the finished one not yet collected.
  std::future<absl::Status> in_flight_;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_CHECKPOINT_WRITER_H_
