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

absl::StatusOr<std::unique_ptr<GradientAllReduce>> GradientAllReduce::Start(
    Communicator& comm, const std::string& group,
    std::vector<at::Tensor> gradients) {
  std::vector<at::Tensor> flat;
  flat.reserve(gradients.size());
  for (const at::Tensor& gradient : gradients) {
    flat.push_back(gradient.reshape({-1}));
  }
  at::Tensor buffer = at::cat(flat);
  ASSIGN_OR_RETURN(std::unique_ptr<PendingOp> op,
                   comm.AllReduceSum(buffer, group));
  return std::unique_ptr<GradientAllReduce>(new GradientAllReduce(
      std::move(gradients), std::move(buffer), std::move(op)));
}

GradientAllReduce::GradientAllReduce(std::vector<at::Tensor> gradients,
                                     at::Tensor buffer,
                                     std::unique_ptr<PendingOp> op)
    : gradients_(std::move(gradients)),
      buffer_(std::move(buffer)),
      op_(std::move(op)) {}

absl::Status GradientAllReduce::Finish(absl::Duration timeout) {
  RETURN_IF_ERROR(op_->Wait(timeout));
  int64_t offset = 0;
  for (at::Tensor& gradient : gradients_) {
    const int64_t size = gradient.numel();
    gradient.copy_(buffer_.narrow(0, offset, size).view_as(gradient));
    offset += size;
  }
  return absl::OkStatus();
}

}  // namespace chimera::worker
