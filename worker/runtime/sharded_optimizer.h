// Optimizer-state sharding (ZeRO-1; the breadth-first pipeline paper's
// sharded data parallelism for the optimizer): the members of a model stage's
// gradient group each step the optimizer for their own shard of the stage's
// parameters, so each keeps 1/G of the optimizer state, and then gather the
// updated shards. The gradients are summed before: whole, as without
// sharding (sharding optimizer), or into each member's shard only
// (gradients-and-optimizer, GradientAllReduce::StartShardSum).
//
//   at::Tensor gradients = BucketGradients(parameters);
//   at::Tensor weights = FlattenParameters(parameters);  // same order
//   ShardedOptimizer optimizer(config, weights, {.member = 1, .members = 2},
//                              comm, "stage-3");
//   ... backward, the gradients' sum ...
//   optimizer.Step(gradients);                          // SHARD_STEP
//   ASSIGN_OR_RETURN(auto gather, optimizer.StartGather());  // ALLGATHER_BEGIN
//   ... other work ...
//   RETURN_IF_ERROR(gather->Wait(timeout));             // ALLGATHER_END
//
// The layout is deterministic: a stage's parameters, in order, are views of
// one flat buffer of n elements, as their gradients are of the gradient
// bucket, and member i of G owns elements [i·n/G, (i+1)·n/G) (ShardOf, the
// layout of the communicator's sharded collectives). The gather is the
// group's AllGather of the buffer.
//
// Sharding full (Residency::kShardBetweenUses) keeps the member's shard in a
// tensor of its own, which the optimizer steps, so that Release can free the
// flat buffer's memory between uses; a gather allocates it again and fills
// it. The parameters stay the same tensors throughout (autograd's saved
// references to them included): only the memory under them comes and goes,
// and nothing may read them while released.
#ifndef CHIMERA_WORKER_RUNTIME_SHARDED_OPTIMIZER_H_
#define CHIMERA_WORKER_RUNTIME_SHARDED_OPTIMIZER_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/comm/communicator.h"
#include "worker/runtime/gradient_sync.h"
#include "worker/runtime/optimizer.h"

namespace chimera::worker {

// Where a shard of a flat buffer lies in the tensors laid out in it: the
// `size` elements of tensor `tensor` from its (flattened) element `offset`
// on, which are the shard's from its element `in_shard` on.
struct ShardPiece {
  size_t tensor = 0;
  int64_t offset = 0;
  int64_t in_shard = 0;
  int64_t size = 0;
};

// The pieces of `shard` in a flat buffer holding tensors of `numels`
// elements one after the other (FlattenParameters' layout), in order; none
// for an empty tensor.
std::vector<ShardPiece> PiecesOfShard(const std::vector<int64_t>& numels,
                                      ShardRange shard);

class ShardedOptimizer {
 public:
  // Whether the parameters are whole between steps (sharding optimizer and
  // gradients-and-optimizer) or only the shard is (full).
  enum class Residency { kWhole, kShardBetweenUses };

  // `parameters` from FlattenParameters; `group` names the gradient group
  // (with this rank as `who`) in `comm`, which must outlive the optimizer.
  ShardedOptimizer(const OptimizerConfig& config, at::Tensor parameters,
                   GroupMember who, Communicator& comm, std::string group,
                   Residency residency = Residency::kWhole);

  ShardedOptimizer(const ShardedOptimizer&) = delete;
  ShardedOptimizer& operator=(const ShardedOptimizer&) = delete;

  // Applies one update to this member's shard from the same shard of
  // `gradients` (BucketGradients' buffer of the same parameters, summed over
  // the group at least in that shard), which it zeroes; what becomes of the
  // rest of the buffer is the caller's (GradientBucket::Reset). The other
  // members' shards of the parameters are stale until a gather ends.
  void Step(const at::Tensor& gradients);
  // Starts gathering the group's updated shards into every member's
  // parameters (allocating their memory again if released); the
  // communicator's error when it cannot start. A failed gather leaves the
  // parameters unusable.
  absl::StatusOr<std::unique_ptr<PendingOp>> StartGather();

  // kShardBetweenUses only. Frees the memory under the parameters, which
  // must not be read until a gather ends; a no-op if already released.
  void Release();
  bool released() const { return released_; }
  // Takes this member's shard from the parameters, which were just set
  // whole (a checkpoint or initial weights imported); they must not be
  // released.
  void TakeShardFromParameters();
  // The shard's values: a view of the parameters (kWhole) or the tensor of
  // its own (kShardBetweenUses), live.
  const at::Tensor& shard_parameters() const { return shard_parameters_; }
  // Whether only the shard is kept between uses (kShardBetweenUses).
  bool shard_only() const { return residency_ == Residency::kShardBetweenUses; }
  // Bytes of the whole flat buffer, held between a gather and a release.
  int64_t parameter_bytes() const { return parameter_bytes_; }

  // This member's shard of the state: one flat tensor per moment.
  OptimizerState state() const { return shard_optimizer_.state(); }
  // Continues from `state`, this member's shard of a state (as state()
  // returns it); Optimizer::Restore's errors.
  absl::Status Restore(const OptimizerState& state) {
    return shard_optimizer_.Restore(state);
  }
  ShardRange shard() const { return shard_; }

 private:
  at::Tensor parameters_;
  const ShardRange shard_;
  const Residency residency_;
  // The flat buffer's memory, as allocated first.
  const int64_t parameter_bytes_;
  // What the Optimizer steps: the shard of parameters_, or (kShardBetweenUses)
  // a copy of it of its own; its gradient views the gradients' shard during
  // Step only.
  at::Tensor shard_parameters_;
  bool released_ = false;
  Optimizer shard_optimizer_;
  Communicator& comm_;
  const std::string group_;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_SHARDED_OPTIMIZER_H_
