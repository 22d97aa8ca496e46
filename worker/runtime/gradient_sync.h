// Gradient synchronisation across the replicas of a model stage: which ranks
// allreduce together (one group per model stage, derived from the schedule),
// and one non-blocking sum-allreduce of a stage's gradients, started by
// ALLREDUCE_BEGIN and finished by ALLREDUCE_END.
//
//   std::vector<CommGroup> groups = GradientGroups(schedule);  // every rank
//   ... create the communicator with `groups` ...
//   ASSIGN_OR_RETURN(auto sync, GradientAllReduce::Start(
//                                   *comm, GradientGroupName(3), grads));
//   ... compute ...
//   RETURN_IF_ERROR(sync->Finish(kDefaultCollectiveTimeout));
//
// The gradients are flattened into one buffer so a stage costs a single
// collective; Finish copies the sums back into the gradient tensors.
#ifndef CHIMERA_WORKER_RUNTIME_GRADIENT_SYNC_H_
#define CHIMERA_WORKER_RUNTIME_GRADIENT_SYNC_H_

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/schedule/program.h"
#include "worker/comm/communicator.h"

namespace chimera::worker {

// "stage-3": the group of model stage 3 (Topology::ModelStage).
std::string GradientGroupName(int model_stage);

// One group per model stage whose replicas live on more than one rank, in
// model-stage order, holding every rank whose program lists a replica of it.
// A rank holding several replicas of one stage appears once: its replicas
// share one set of parameters (see program_executor.h).
std::vector<CommGroup> GradientGroups(const schedule::Schedule& schedule);

class GradientAllReduce {
 public:
  // Starts summing `gradients` (all defined, one dtype, CPU) over the members
  // of `group`, which must issue the same call with tensors of the same
  // shapes in the same order.
  static absl::StatusOr<std::unique_ptr<GradientAllReduce>> Start(
      Communicator& comm, const std::string& group,
      std::vector<at::Tensor> gradients);

  GradientAllReduce(const GradientAllReduce&) = delete;
  GradientAllReduce& operator=(const GradientAllReduce&) = delete;

  // Waits for the sum and writes it into the gradient tensors. The error of
  // the wait (DEADLINE_EXCEEDED, UNAVAILABLE) when the collective fails.
  absl::Status Finish(absl::Duration timeout);

 private:
  GradientAllReduce(std::vector<at::Tensor> gradients, at::Tensor buffer,
                    std::unique_ptr<PendingOp> op);

  std::vector<at::Tensor> gradients_;
  at::Tensor buffer_;
  std::unique_ptr<PendingOp> op_;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_GRADIENT_SYNC_H_
