#include "worker/runtime/gradient_sync.h"

#include <ATen/ATen.h>

#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace chimera::worker {

std::string GradientGroupName(int model_stage) {
  return absl::StrCat("stage-", model_stage);
}

std::vector<CommGroup> GradientGroups(const schedule::Schedule& schedule) {
  std::map<int, std::set<int>> holders;
  for (const schedule::WorkerProgram& program : schedule.workers) {
    for (const schedule::StageRef& ref : program.stages) {
      holders[schedule.topology.ModelStage(ref)].insert(program.rank);
    }
  }
  std::vector<CommGroup> groups;
  for (const auto& [model_stage, ranks] : holders) {
    if (ranks.size() < 2) continue;
    groups.push_back({GradientGroupName(model_stage),
                      std::vector<int>(ranks.begin(), ranks.end())});
  }
  return groups;
}

at::Tensor BucketGradients(const std::vector<at::Tensor>& parameters) {
  int64_t total = 0;
  for (const at::Tensor& parameter : parameters) total += parameter.numel();
  at::Tensor bucket = at::zeros(
      {total}, parameters.empty() ? at::TensorOptions()
                                  : parameters.front().options());
  int64_t offset = 0;
  for (const at::Tensor& parameter : parameters) {
    const int64_t size = parameter.numel();
    at::Tensor(parameter).mutable_grad() =
        bucket.narrow(0, offset, size).view(parameter.sizes());
    offset += size;
  }
  return bucket;
}

absl::StatusOr<std::unique_ptr<GradientAllReduce>> GradientAllReduce::Start(
    Communicator& comm, const std::string& group, at::Tensor bucket) {
  ASSIGN_OR_RETURN(std::unique_ptr<PendingOp> op,
                   comm.AllReduceSum(bucket, group));
  return std::unique_ptr<GradientAllReduce>(
      new GradientAllReduce(std::move(bucket), std::move(op)));
}

GradientAllReduce::GradientAllReduce(at::Tensor bucket,
                                     std::unique_ptr<PendingOp> op)
    : bucket_(std::move(bucket)), op_(std::move(op)) {}

absl::Status GradientAllReduce::Finish(absl::Duration timeout) {
  return op_->Wait(timeout);
}

}  // namespace chimera::worker
