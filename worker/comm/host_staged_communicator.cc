#include "worker/comm/host_staged_communicator.h"

#include <ATen/ATen.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/comm/torch_error.h"

namespace chimera::worker {
namespace {

// A host operation, and where its result goes once it has completed: the
// device tensor of a receive or a collective (none for a send).
class StagedOp final : public PendingOp {
 public:
  StagedOp(std::unique_ptr<PendingOp> host_op, at::Tensor host,
           at::Tensor result_target)
      : host_op_(std::move(host_op)),
        host_(std::move(host)),
        result_target_(std::move(result_target)) {}

  absl::Status Wait(absl::Duration timeout) override {
    RETURN_IF_ERROR(host_op_->Wait(timeout));
    if (!result_target_.defined()) return absl::OkStatus();
    try {
      result_target_.copy_(host_);
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("copying a staged result to ",
                                              result_target_.device().str(),
                                              ": ", TorchErrorMessage(e)));
    }
    result_target_ = at::Tensor();  // copied once, however often waited for
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<PendingOp> host_op_;
  at::Tensor host_;
  at::Tensor result_target_;
};

// A host copy of `tensor`: its values, or (for a receive) only its shape.
absl::StatusOr<at::Tensor> HostCopy(const at::Tensor& tensor,
                                    bool with_values) {
  if (!tensor.defined()) {
    return absl::InvalidArgumentError("the tensor to stage is undefined");
  }
  try {
    if (!with_values)
      return at::empty_like(tensor, tensor.options().device(at::kCPU));
    return tensor.to(at::kCPU, /*non_blocking=*/false, /*copy=*/true);
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("staging a tensor of ", tensor.device().str(),
                     " in host memory: ", TorchErrorMessage(e)));
  }
}

class HostStagedCommunicator final : public Communicator {
 public:
  explicit HostStagedCommunicator(std::unique_ptr<Communicator> host_transport)
      : host_(std::move(host_transport)) {}

  int rank() const override { return host_->rank(); }
  int world_size() const override { return host_->world_size(); }

  absl::StatusOr<std::unique_ptr<PendingOp>> Send(const at::Tensor& tensor,
                                                  int peer,
                                                  int64_t tag) override {
    ASSIGN_OR_RETURN(at::Tensor host, HostCopy(tensor, /*with_values=*/true));
    ASSIGN_OR_RETURN(std::unique_ptr<PendingOp> op,
                     host_->Send(host, peer, tag));
    return Staged(std::move(op), std::move(host), at::Tensor());
  }

  absl::StatusOr<std::unique_ptr<PendingOp>> Recv(const at::Tensor& tensor,
                                                  int peer,
                                                  int64_t tag) override {
    ASSIGN_OR_RETURN(at::Tensor host, HostCopy(tensor, /*with_values=*/false));
    ASSIGN_OR_RETURN(std::unique_ptr<PendingOp> op,
                     host_->Recv(host, peer, tag));
    return Staged(std::move(op), std::move(host), tensor);
  }

  absl::StatusOr<std::unique_ptr<PendingOp>> AllReduceSum(
      const at::Tensor& tensor, absl::string_view group) override {
    return StagedCollective(&Communicator::AllReduceSum, tensor, group);
  }

  absl::StatusOr<std::unique_ptr<PendingOp>> AllGather(
      const at::Tensor& buffer, absl::string_view group) override {
    return StagedCollective(&Communicator::AllGather, buffer, group);
  }

  absl::StatusOr<std::unique_ptr<PendingOp>> ReduceScatterSum(
      const at::Tensor& buffer, absl::string_view group) override {
    return StagedCollective(&Communicator::ReduceScatterSum, buffer, group);
  }

  absl::Status Barrier(absl::Duration timeout) override {
    return host_->Barrier(timeout);
  }

 private:
  using CollectiveMethod = absl::StatusOr<std::unique_ptr<PendingOp>> (
      Communicator::*)(const at::Tensor&, absl::string_view);

  // Runs `collective` of the host transport on a host copy of `tensor`, and
  // copies the result back when waited for.
  absl::StatusOr<std::unique_ptr<PendingOp>> StagedCollective(
      CollectiveMethod collective, const at::Tensor& tensor,
      absl::string_view group) {
    ASSIGN_OR_RETURN(at::Tensor host, HostCopy(tensor, /*with_values=*/true));
    ASSIGN_OR_RETURN(std::unique_ptr<PendingOp> op,
                     ((*host_).*collective)(host, group));
    return Staged(std::move(op), std::move(host), tensor);
  }

  static std::unique_ptr<PendingOp> Staged(std::unique_ptr<PendingOp> op,
                                           at::Tensor host, at::Tensor target) {
    return std::make_unique<StagedOp>(std::move(op), std::move(host),
                                      std::move(target));
  }

  std::unique_ptr<Communicator> host_;
};

}  // namespace

std::unique_ptr<Communicator> StageThroughHost(
    std::unique_ptr<Communicator> host_transport) {
  return std::make_unique<HostStagedCommunicator>(std::move(host_transport));
}

}  // namespace chimera::worker
