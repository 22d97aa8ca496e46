#include "worker/runtime/sharded_optimizer.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <utility>

#include "common/status_macros.h"

namespace chimera::worker {
namespace {

// The shard of `flat` as a tensor of its own, whose gradient is the same
// shard of `gradients`: what the Optimizer steps.
at::Tensor ShardWithGradient(const at::Tensor& flat,
                             const at::Tensor& gradients, ShardRange shard) {
  at::Tensor view = flat.narrow(0, shard.begin, shard.size());
  view.mutable_grad() = gradients.narrow(0, shard.begin, shard.size());
  return view;
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
                                   at::Tensor parameters, at::Tensor gradients,
                                   GroupMember who, Communicator& comm,
                                   std::string group)
    : parameters_(std::move(parameters)),
      gradients_(std::move(gradients)),
      shard_(ShardOf(parameters_.numel(), who.member, who.members)),
      shard_optimizer_(config,
                       {ShardWithGradient(parameters_, gradients_, shard_)}),
      comm_(comm),
      group_(std::move(group)) {}

void ShardedOptimizer::Step() {
  at::NoGradGuard no_grad;
  shard_optimizer_.Step();  // zeroes the shard's gradients
  gradients_.narrow(0, 0, shard_.begin).zero_();
  gradients_.narrow(0, shard_.end, gradients_.numel() - shard_.end).zero_();
}

absl::StatusOr<std::unique_ptr<PendingOp>> ShardedOptimizer::StartGather() {
  return comm_.AllGather(parameters_, group_);
}

}  // namespace chimera::worker
