// Gradient synchronisation across the replicas of a model stage: which ranks
// allreduce together (one group per model stage, derived from the schedule),
// and one non-blocking sum-allreduce of a stage's gradients, started by
// ALLREDUCE_BEGIN and finished by ALLREDUCE_END.
//
//   std::vector<CommGroup> groups = GradientGroups(schedule);  // every rank
//   ... create the communicator with `groups` ...
//   at::Tensor bucket = BucketGradients(stage->parameters());  // once
//   ... backward ...
//   ASSIGN_OR_RETURN(auto sync, GradientAllReduce::Start(
//                                   *comm, GradientGroupName(3), bucket));
//   ... compute ...
//   RETURN_IF_ERROR(sync->Finish(kDefaultCollectiveTimeout));
//
// A stage's gradients live in one buffer so a stage costs a single
// collective, summed in place: nothing is copied per step.
#ifndef CHIMERA_WORKER_RUNTIME_GRADIENT_SYNC_H_
#define CHIMERA_WORKER_RUNTIME_GRADIENT_SYNC_H_

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "schedule/program.h"
#include "worker/comm/communicator.h"

namespace chimera::worker {

// "stage-3": the group of model stage 3 (Topology::ModelStage).
std::string GradientGroupName(int model_stage);

// One group per model stage whose replicas live on more than one rank, in
// model-stage order, holding every rank whose program lists a replica of it.
// A rank holding several replicas of one stage appears once: its replicas
// share one set of parameters (see program_executor.h).
std::vector<CommGroup> GradientGroups(const schedule::Schedule& schedule);

// Allocates one zeroed, contiguous buffer for the gradients of `parameters`
// (all CPU, one dtype) and makes each parameter's gradient a view of its
// slice, in order, and returns the buffer. Autograd accumulates into an
// existing gradient in place and the optimizer zeroes it in place, so the
// views stay valid and a stage's gradients are allreduced as one tensor
// without copying them in or out (as DDP's gradient_as_bucket_view).
at::Tensor BucketGradients(const std::vector<at::Tensor>& parameters);

class GradientAllReduce {
 public:
  // Starts summing `bucket` (from BucketGradients) in place over the members
  // of `group`, which must issue the same call with buckets of the same
  // size.
  static absl::StatusOr<std::unique_ptr<GradientAllReduce>> Start(
      Communicator& comm, const std::string& group, at::Tensor bucket);

  GradientAllReduce(const GradientAllReduce&) = delete;
  GradientAllReduce& operator=(const GradientAllReduce&) = delete;

  // Waits for the sum, which is then in the bucket and so in the gradients
  // that view it. The error of the wait (DEADLINE_EXCEEDED, UNAVAILABLE)
  // when the collective fails.
  absl::Status Finish(absl::Duration timeout);

 private:
  GradientAllReduce(at::Tensor bucket, std::unique_ptr<PendingOp> op);

  at::Tensor bucket_;  // kept alive until the collective is done
  std::unique_ptr<PendingOp> op_;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_GRADIENT_SYNC_H_
