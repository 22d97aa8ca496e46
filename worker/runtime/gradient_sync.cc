#include "worker/runtime/gradient_sync.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <iterator>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace chimera::worker {

std::string GradientGroupName(int model_stage) {
  return absl::StrCat("stage-", model_stage);
}

std::vector<int> TiedEmbeddingHolders(
    const schedule::ScheduleOutline& outline) {
  const int last = outline.topology.NumModelStages() - 1;
  std::vector<int> holders;
  for (int rank = 0; rank < outline.world_size(); ++rank) {
    for (const schedule::StageRef& ref : outline.stages_by_rank[rank]) {
      const int model_stage = outline.topology.ModelStage(ref);
      if (model_stage == 0 || model_stage == last) {
        holders.push_back(rank);
        break;
      }
    }
  }
  return holders;
}

namespace {

// The ranks holding a replica of each model stage, by model stage.
std::map<int, std::set<int>> StageHolders(
    const schedule::ScheduleOutline& outline) {
  std::map<int, std::set<int>> holders;
  for (int rank = 0; rank < outline.world_size(); ++rank) {
    for (const schedule::StageRef& ref : outline.stages_by_rank[rank]) {
      holders[outline.topology.ModelStage(ref)].insert(rank);
    }
  }
  return holders;
}

}  // namespace

std::map<int, GroupMember> StageGroupMemberships(
    const schedule::ScheduleOutline& outline, int rank) {
  std::map<int, GroupMember> memberships;
  for (const auto& [model_stage, ranks] : StageHolders(outline)) {
    const auto it = ranks.find(rank);
    if (ranks.size() < 2 || it == ranks.end()) continue;
    memberships[model_stage] = {
        .member = static_cast<int>(std::distance(ranks.begin(), it)),
        .members = static_cast<int>(ranks.size())};
  }
  return memberships;
}

std::vector<CommGroup> GradientGroups(const schedule::ScheduleOutline& outline,
                                      bool tie_embeddings) {
  std::vector<CommGroup> groups;
  for (const auto& [model_stage, ranks] : StageHolders(outline)) {
    if (ranks.size() < 2) continue;
    groups.push_back({GradientGroupName(model_stage),
                      std::vector<int>(ranks.begin(), ranks.end())});
  }
  if (tie_embeddings && outline.topology.NumModelStages() > 1) {
    std::vector<int> holders = TiedEmbeddingHolders(outline);
    if (holders.size() > 1) {
      groups.push_back({kTiedEmbeddingGroup, std::move(holders)});
    }
  }
  return groups;
}

namespace {

// A new, uninitialised flat buffer for every element of `parameters` (one
// dtype and device), and each parameter's slice of it in order, shaped as the
// parameter.
struct FlatLayout {
  at::Tensor buffer;
  std::vector<at::Tensor> slices;
};

FlatLayout LayOutFlat(const std::vector<at::Tensor>& parameters) {
  int64_t total = 0;
  for (const at::Tensor& parameter : parameters) total += parameter.numel();
  FlatLayout layout{
      at::empty({total}, parameters.empty() ? at::TensorOptions()
                                            : parameters.front().options()),
      {}};
  int64_t offset = 0;
  for (const at::Tensor& parameter : parameters) {
    const int64_t size = parameter.numel();
    layout.slices.push_back(
        layout.buffer.narrow(0, offset, size).view(parameter.sizes()));
    offset += size;
  }
  return layout;
}

}  // namespace

at::Tensor BucketGradients(const std::vector<at::Tensor>& parameters) {
  FlatLayout layout = LayOutFlat(parameters);
  layout.buffer.zero_();
  for (size_t i = 0; i < parameters.size(); ++i) {
    at::Tensor(parameters[i]).mutable_grad() = layout.slices[i];
  }
  return layout.buffer;
}

at::Tensor FlattenParameters(const std::vector<at::Tensor>& parameters) {
  at::NoGradGuard no_grad;
  FlatLayout layout = LayOutFlat(parameters);
  for (size_t i = 0; i < parameters.size(); ++i) {
    layout.slices[i].copy_(parameters[i]);
    // set_data keeps the parameter's identity (its autograd leaf, every
    // holder of it) and swaps the storage under it.
    at::Tensor(parameters[i]).set_data(layout.slices[i]);
  }
  return layout.buffer;
}

at::Tensor NoRowsUsed(const at::Tensor& weight) {
  return at::zeros({weight.size(0)}, weight.options());
}

void MarkUsedRows(at::Tensor& used_rows, const at::Tensor& token_ids) {
  at::NoGradGuard no_grad;
  used_rows.index_fill_(0, token_ids.flatten(), 1);
}

absl::StatusOr<std::unique_ptr<GradientAllReduce>> GradientAllReduce::Start(
    Communicator& comm, const std::string& group, at::Tensor bucket,
    std::optional<RowSparseGradient> row_sparse) {
  std::unique_ptr<GradientAllReduce> sync(
      new GradientAllReduce(comm, group, bucket, row_sparse));
  std::vector<at::Tensor> dense_parts = {bucket};
  if (row_sparse) {
    const int64_t begin =
        row_sparse->gradient.storage_offset() - bucket.storage_offset();
    const int64_t end = begin + row_sparse->gradient.numel();
    dense_parts = {bucket.narrow(0, 0, begin),
                   bucket.narrow(0, end, bucket.numel() - end)};
  }
  for (const at::Tensor& part : dense_parts) {
    if (part.numel() == 0) continue;
    ASSIGN_OR_RETURN(std::unique_ptr<PendingOp> op,
                     comm.AllReduceSum(part, group));
    sync->dense_ops_.push_back(std::move(op));
  }
  if (row_sparse) {
    ASSIGN_OR_RETURN(sync->used_rows_op_,
                     comm.AllReduceSum(row_sparse->used_rows, group));
  }
  return sync;
}

absl::StatusOr<std::unique_ptr<GradientAllReduce>>
GradientAllReduce::StartShardSum(Communicator& comm, const std::string& group,
                                 at::Tensor bucket) {
  std::unique_ptr<GradientAllReduce> sync(
      new GradientAllReduce(comm, group, bucket, std::nullopt));
  ASSIGN_OR_RETURN(std::unique_ptr<PendingOp> op,
                   comm.ReduceScatterSum(bucket, group));
  sync->dense_ops_.push_back(std::move(op));
  return sync;
}

GradientAllReduce::GradientAllReduce(
    Communicator& comm, std::string group, at::Tensor bucket,
    std::optional<RowSparseGradient> row_sparse)
    : comm_(comm),
      group_(std::move(group)),
      bucket_(std::move(bucket)),
      row_sparse_(std::move(row_sparse)) {}

absl::Status GradientAllReduce::Finish(absl::Duration timeout) {
  if (row_sparse_) RETURN_IF_ERROR(SumUsedRows(timeout));
  for (const std::unique_ptr<PendingOp>& op : dense_ops_) {
    RETURN_IF_ERROR(op->Wait(timeout));
  }
  return absl::OkStatus();
}

// Every member knows the union of the used rows once their masks are summed,
// so all of them gather the same rows, in the same order.
absl::Status GradientAllReduce::SumUsedRows(absl::Duration timeout) {
  RETURN_IF_ERROR(used_rows_op_->Wait(timeout));
  at::NoGradGuard no_grad;
  at::Tensor& gradient = row_sparse_->gradient;
  const at::Tensor rows = at::nonzero(row_sparse_->used_rows).flatten();
  if (rows.numel() == 0) return absl::OkStatus();  // so on every member
  at::Tensor used = gradient.index_select(0, rows);
  ASSIGN_OR_RETURN(std::unique_ptr<PendingOp> op,
                   comm_.AllReduceSum(used, group_));
  RETURN_IF_ERROR(op->Wait(timeout));
  gradient.index_copy_(0, rows, used);
  return absl::OkStatus();
}

}  // namespace chimera::worker
