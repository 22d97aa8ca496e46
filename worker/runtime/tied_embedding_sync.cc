#include "worker/runtime/tied_embedding_sync.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <map>
#include <utility>

#include "common/status_macros.h"

namespace chimera::worker {

std::vector<size_t> TiedGradientsComplete(
    const schedule::WorkerProgram& program,
    const schedule::Topology& topology) {
  const int last = topology.NumModelStages() - 1;
  // By the micro-batch it computes, the latest weight gradient of an end
  // stage so far (any micro-batch: key 0 for a synchronous step).
  std::map<int, size_t> latest;
  std::vector<size_t> complete;
  for (size_t index = 0; index < program.instructions.size(); ++index) {
    const schedule::Instruction& inst = program.instructions[index];
    if (topology.Asynchronous() &&
        inst.op == schedule::OpKind::kOptimizerStep) {
      const auto it = latest.find(inst.micro_batches.at(0));
      if (it != latest.end()) complete.push_back(it->second);
      continue;
    }
    if (!schedule::ComputesWeightGradient(inst.op)) continue;
    const int model_stage = topology.ModelStage({inst.chunk, inst.stage});
    if (model_stage != 0 && model_stage != last) continue;
    latest[topology.Asynchronous() ? inst.micro_batches.at(0) : 0] = index;
  }
  if (!topology.Asynchronous() && !latest.empty()) {
    complete.push_back(latest.begin()->second);
  }
  return complete;
}

TiedEmbeddingSync::TiedEmbeddingSync(std::vector<at::Tensor> copies,
                                     Communicator* comm)
    : copies_(std::move(copies)), comm_(comm) {
  for (at::Tensor& copy : copies_) copy.mutable_grad() = at::zeros_like(copy);
}

absl::Status TiedEmbeddingSync::Start() {
  if (started_) {
    return absl::FailedPreconditionError(
        "the tied embedding's gradient sum is already in flight");
  }
  started_ = true;
  at::NoGradGuard no_grad;
  at::Tensor sum = copies_.front().grad();
  for (size_t i = 1; i < copies_.size(); ++i) sum.add_(copies_[i].grad());
  if (comm_ == nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(allreduce_,
                   GradientAllReduce::Start(*comm_, kTiedEmbeddingGroup, sum));
  return absl::OkStatus();
}

absl::Status TiedEmbeddingSync::Finish(absl::Duration timeout) {
  if (!started_) {
    return absl::FailedPreconditionError(
        "the tied embedding's gradient sum was not started");
  }
  started_ = false;
  if (allreduce_ != nullptr) {
    const std::unique_ptr<GradientAllReduce> allreduce = std::move(allreduce_);
    RETURN_IF_ERROR(allreduce->Finish(timeout));
  }
  at::NoGradGuard no_grad;
  for (size_t i = 1; i < copies_.size(); ++i) {
    copies_[i].mutable_grad().copy_(copies_.front().grad());
  }
  return absl::OkStatus();
}

int64_t TiedEmbeddingSync::gradient_bytes() const {
  int64_t bytes = 0;
  for (const at::Tensor& copy : copies_) {
    bytes += static_cast<int64_t>(copy.grad().nbytes());
  }
  return bytes;
}

}  // namespace chimera::worker
