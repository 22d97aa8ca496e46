// Gradient synchronisation across the replicas of a model stage: which ranks
// allreduce together (one group per model stage, derived from the schedule),
// and one non-blocking sum of a stage's gradients (an allreduce, or a
// reduce-scatter for a stage sharded that way), started by ALLREDUCE_BEGIN
// and finished by ALLREDUCE_END.
//
//   std::vector<CommGroup> groups =  // every rank
//       GradientGroups(outline, config.tie_embeddings);
//   ... create the communicator with `groups` ...
//   at::Tensor bucket = BucketGradients(stage->parameters());  // once
//   ... backward ...
//   ASSIGN_OR_RETURN(auto sync, GradientAllReduce::Start(
//                                   *comm, GradientGroupName(3), bucket));
//   ... compute ...
//   RETURN_IF_ERROR(sync->Finish(kDefaultCollectiveTimeout));
//
// A stage's gradients live in one buffer so a stage costs a single
// collective, summed in place: nothing is copied per step. The exception is a
// token embedding's gradient, which is summed over the rows some replica
// used only (RowSparseGradient): two small collectives and a copy of those
// rows in and out instead of its whole size.
#ifndef CHIMERA_WORKER_RUNTIME_GRADIENT_SYNC_H_
#define CHIMERA_WORKER_RUNTIME_GRADIENT_SYNC_H_

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "schedule/rank_schedule.h"
#include "worker/comm/communicator.h"

namespace chimera::worker {

// "stage-3": the group of model stage 3 (Topology::ModelStage).
std::string GradientGroupName(int model_stage);

// The group that sums a tied token embedding's gradient across the stages
// holding a copy of its weight (see tied_embedding_sync.h).
inline constexpr char kTiedEmbeddingGroup[] = "tied-embedding";

// The ranks holding a replica of the model's first or last stage, ascending:
// with tied embeddings and more than one model stage, those that hold a copy
// of the token embedding's weight.
std::vector<int> TiedEmbeddingHolders(const schedule::ScheduleOutline& outline);

// One group per model stage whose replicas live on more than one rank, in
// model-stage order, holding every rank whose program lists a replica of it.
// A rank holding several replicas of one stage appears once: its replicas
// share one set of parameters (see program_executor.h). With
// `tie_embeddings` and more than one model stage, also kTiedEmbeddingGroup
// of the TiedEmbeddingHolders, when they are more than one rank.
std::vector<CommGroup> GradientGroups(const schedule::ScheduleOutline& outline,
                                      bool tie_embeddings);

// A rank's place in a gradient group of `members` ranks.
struct GroupMember {
  int member = 0;  // its index in the group's ascending ranks
  int members = 1;
};

// Where `rank` holds a model stage with other ranks: its place in that
// stage's group (as GradientGroups lists it), by model stage.
std::map<int, GroupMember> StageGroupMemberships(
    const schedule::ScheduleOutline& outline, int rank);

// Allocates one zeroed, contiguous buffer for the gradients of `parameters`
// (all CPU, one dtype) and makes each parameter's gradient a view of its
// slice, in order, and returns the buffer. Autograd accumulates into an
// existing gradient in place and the optimizer zeroes it in place, so the
// views stay valid and a stage's gradients are allreduced as one tensor
// without copying them in or out (as DDP's gradient_as_bucket_view).
at::Tensor BucketGradients(const std::vector<at::Tensor>& parameters);

// Moves the values of `parameters` (one dtype and device) into one new flat
// buffer in BucketGradients' order, makes each parameter a view of its slice
// and returns the buffer (optimizer-state sharding steps slices of it).
// Autograd and every holder of a parameter see the same tensor, whose data
// now lives in the buffer.
at::Tensor FlattenParameters(const std::vector<at::Tensor>& parameters);

// A parameter whose gradient is zero outside the rows a step used: a token
// embedding's, of which a step of a few thousand tokens uses a few thousand
// rows of a vocabulary of tens of thousands. Summing only the rows that some
// replica used gives every row the same sum as summing all of them (the
// others are zero everywhere), for a fraction of the bytes.
struct RowSparseGradient {
  at::Tensor gradient;   // [rows, columns]: a slice of the stage's bucket
  at::Tensor used_rows;  // [rows], the gradient's dtype: > 0 where used
};

// A zeroed used-rows mask for `weight`, [rows], on its device and in its
// dtype.
at::Tensor NoRowsUsed(const at::Tensor& weight);

// Marks the rows that `token_ids` (int64, any shape) name in `used_rows`.
void MarkUsedRows(at::Tensor& used_rows, const at::Tensor& token_ids);

class GradientAllReduce {
 public:
  // Starts summing `bucket` (from BucketGradients) in place over the members
  // of `group`, which must issue the same call with buckets of the same
  // layout. With `row_sparse`, a parameter's gradient in the bucket is summed
  // over the rows some member used only; its `used_rows` is summed too (in
  // place: it is spent until the next step zeroes it).
  static absl::StatusOr<std::unique_ptr<GradientAllReduce>> Start(
      Communicator& comm, const std::string& group, at::Tensor bucket,
      std::optional<RowSparseGradient> row_sparse = std::nullopt);

  // Starts summing this member's shard of `bucket` over `group` (the
  // communicator's ReduceScatterSum), for a stage whose members each step
  // their own shard (sharding gradients-and-optimizer): after Finish only
  // that shard of the bucket holds the sum.
  static absl::StatusOr<std::unique_ptr<GradientAllReduce>> StartShardSum(
      Communicator& comm, const std::string& group, at::Tensor bucket);

  GradientAllReduce(const GradientAllReduce&) = delete;
  GradientAllReduce& operator=(const GradientAllReduce&) = delete;

  // Waits for the sum, which is then in the bucket and so in the gradients
  // that view it; sums the used rows of a row-sparse gradient first. The
  // error of a wait (DEADLINE_EXCEEDED, UNAVAILABLE) when a collective fails.
  absl::Status Finish(absl::Duration timeout);

 private:
  GradientAllReduce(Communicator& comm, std::string group, at::Tensor bucket,
                    std::optional<RowSparseGradient> row_sparse);

  absl::Status SumUsedRows(absl::Duration timeout);

  Communicator& comm_;
  const std::string group_;
  at::Tensor bucket_;  // kept alive until the collectives are done
  std::optional<RowSparseGradient> row_sparse_;
  // The bucket's sum (around a row-sparse gradient: the parts before and
  // after it), then the used rows' union.
  std::vector<std::unique_ptr<PendingOp>> dense_ops_;
  std::unique_ptr<PendingOp> used_rows_op_;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_GRADIENT_SYNC_H_
