#include "worker/runtime/sharded_optimizer.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <utility>

#include "common/status_macros.h"

namespace chimera::worker {
namespace {

// The shard of `flat` as a tensor of its own: what the Optimizer steps.
at::Tensor ShardOfFlat(const at::Tensor& flat, ShardRange shard) {
  return flat.narrow(0, shard.begin, shard.size());
}

}  // namespace

std::vector<ShardPiece> PiecesOfShard(const std::vector<int64_t>& numels,
                                      ShardRange shard) {
  std::vector<ShardPiece> pieces;
  int64_t start = 0;  // of tensor i in the flat buffer
  for (size_t i = 0; i < numels.size(); ++i) {
    const int64_t begin = std::max(start, shard.begin);
    const int64_t end = std::min(start + numels[i], shard.end);
    if (begin < end) {
      pieces.push_back({i, begin - start, begin - shard.begin, end - begin});
    }
    start += numels[i];
  }
  return pieces;
}

ShardedOptimizer::ShardedOptimizer(const OptimizerConfig& config,
                                   at::Tensor parameters, GroupMember who,
                                   Communicator& comm, std::string group)
    : parameters_(std::move(parameters)),
      shard_(ShardOf(parameters_.numel(), who.member, who.members)),
      shard_parameters_(ShardOfFlat(parameters_, shard_)),
      shard_optimizer_(config, {shard_parameters_}),
      comm_(comm),
      group_(std::move(group)) {}

void ShardedOptimizer::Step(const at::Tensor& gradients) {
  at::NoGradGuard no_grad;
  shard_parameters_.mutable_grad() = ShardOfFlat(gradients, shard_);
  shard_optimizer_.Step();  // zeroes the shard's gradients
  // Not kept: a buffer held within a step only is freed after it.
  shard_parameters_.mutable_grad() = at::Tensor();
}

absl::StatusOr<std::unique_ptr<PendingOp>> ShardedOptimizer::StartGather() {
  return comm_.AllGather(parameters_, group_);
}

}  // namespace chimera::worker
