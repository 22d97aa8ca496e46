#include "worker/runtime/sharded_optimizer.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/StorageImpl.h>

#include <algorithm>
#include <utility>

#include "common/status_macros.h"

namespace chimera::worker {
namespace {

// The shard of `flat`, a view of it.
at::Tensor ShardOfFlat(const at::Tensor& flat, ShardRange shard) {
  return flat.narrow(0, shard.begin, shard.size());
}

// Frees the memory under `tensor` and every view of it, keeping the storage
// object they share, so that AllocateStorage can put memory under them all
// again.
void FreeStorage(const at::Tensor& tensor) {
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(c10::DataPtr(nullptr, tensor.device()));
  storage->set_nbytes(0);
}

// Gives `tensor`'s storage, freed by FreeStorage, `bytes` of new memory from
// its allocator (the tracking one, where installed), its contents undefined.
void AllocateStorage(const at::Tensor& tensor, int64_t bytes) {
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(storage->allocator()->allocate(bytes));
  storage->set_nbytes(bytes);
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
                                   Communicator& comm, std::string group,
                                   Residency residency)
    : parameters_(std::move(parameters)),
      shard_(ShardOf(parameters_.numel(), who.member, who.members)),
      residency_(residency),
      parameter_bytes_(static_cast<int64_t>(parameters_.storage().nbytes())),
      shard_parameters_(residency == Residency::kWhole
                            ? ShardOfFlat(parameters_, shard_)
                            : ShardOfFlat(parameters_, shard_).clone()),
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
  if (shard_only()) {
    if (released_) AllocateStorage(parameters_, parameter_bytes_);
    released_ = false;
    at::NoGradGuard no_grad;
    ShardOfFlat(parameters_, shard_).copy_(shard_parameters_);
  }
  return comm_.AllGather(parameters_, group_);
}

void ShardedOptimizer::Release() {
  if (!shard_only() || released_) return;
  FreeStorage(parameters_);
  released_ = true;
}

void ShardedOptimizer::TakeShardFromParameters() {
  if (!shard_only()) return;
  at::NoGradGuard no_grad;
  shard_parameters_.copy_(ShardOfFlat(parameters_, shard_));
}

}  // namespace chimera::worker
