// Tied embeddings across pipeline stages. When the head projects by the token
// embedding's weight and the model has more than one stage, the first
// stage's embedding and the last stage's head each hold a copy of that
// weight (stage.h). On one device the weight's gradient is what the
// embedding and the head contribute, summed; here each copy accumulates its
// own stage's part only. Summing every copy's gradient over all the ranks
// holding one (kTiedEmbeddingGroup; a rank with both copies adds them first)
// gives each copy the whole gradient, so the optimizer, stepping every copy
// from the same state with the same gradient, keeps the copies equal.
//
// The copies' gradients stay out of their stages' buckets: a stage's
// allreduce followed by this one would count a replica's part twice.
//
//   TiedEmbeddingSync sync(copies, holders > 1 ? comm : nullptr);
//   ... after each instruction TiedGradientsComplete(program, topology) lists:
//   RETURN_IF_ERROR(sync.Start());
//   ... before the OPTIMIZER_STEP that follows it:
//   RETURN_IF_ERROR(sync.Finish(timeout));
#ifndef CHIMERA_WORKER_RUNTIME_TIED_EMBEDDING_SYNC_H_
#define CHIMERA_WORKER_RUNTIME_TIED_EMBEDDING_SYNC_H_

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "schedule/program.h"
#include "worker/comm/communicator.h"
#include "worker/runtime/gradient_sync.h"

namespace chimera::worker {

// The instructions of `program` after which the rank's part of a tied
// embedding's gradient is complete for an update: of those that accumulate
// gradients into the first or the last model stage's parameters (a BACKWARD
// or a BACKWARD_WEIGHT), the last one, or under an asynchronous rule the
// last before each OPTIMIZER_STEP on the micro-batch that update names.
// Empty when there is none.
std::vector<size_t> TiedGradientsComplete(
    const schedule::WorkerProgram& program, const schedule::Topology& topology);

class TiedEmbeddingSync {
 public:
  // `copies`: the copies of the weight this rank holds (one or two, same
  // shape), each then given a zeroed gradient of its own. `comm` (with
  // kTiedEmbeddingGroup) is null when no other rank holds a copy.
  TiedEmbeddingSync(std::vector<at::Tensor> copies, Communicator* comm);

  TiedEmbeddingSync(const TiedEmbeddingSync&) = delete;
  TiedEmbeddingSync& operator=(const TiedEmbeddingSync&) = delete;

  // Starts the sum; the rank's parts of the gradient must be complete.
  absl::Status Start();
  // Waits for the sum and gives it to every copy. FAILED_PRECONDITION when
  // Start did not run since the last Finish.
  absl::Status Finish(absl::Duration timeout);

  bool in_flight() const { return started_; }
  // What the copies' gradients take.
  int64_t gradient_bytes() const;

 private:
  std::vector<at::Tensor> copies_;
  Communicator* const comm_;
  bool started_ = false;
  std::unique_ptr<GradientAllReduce> allreduce_;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_TIED_EMBEDDING_SYNC_H_
