#include "worker/comm/gloo_communicator.h"

#include <algorithm>
#include <map>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/comm/group_allreducer.h"
#include "worker/comm/torch_error.h"

namespace chimera::worker {
namespace {

using ProcessGroup = c10::intrusive_ptr<c10d::ProcessGroupGloo>;

// Store key prefixes: the point-to-point group and the gradient groups.
constexpr absl::string_view kWorldPrefix = "chimera/world";
constexpr absl::string_view kGroupPrefix = "chimera/group/";
constexpr absl::string_view kSharedMemoryPrefix = "chimera/shm/";

class GlooPendingOp final : public PendingOp {
 public:
  GlooPendingOp(c10::intrusive_ptr<c10d::Work> work, at::Tensor tensor,
                std::string description)
      : work_(std::move(work)),
        tensor_(std::move(tensor)),
        description_(std::move(description)) {}

  absl::Status Wait(absl::Duration timeout) override {
    try {
      work_->wait(absl::ToChronoMilliseconds(timeout));
      return absl::OkStatus();
    } catch (const std::exception& e) {
      const std::string message = TorchErrorMessage(e);
      const std::string text =
          absl::StrCat(description_, " failed (waited at most ",
                       absl::FormatDuration(timeout), "): ", message);
      // Gloo reports "Timed out waiting ...", c10d "Operation timed out!".
      if (absl::StrContains(absl::AsciiStrToLower(message), "timed out")) {
        return absl::DeadlineExceededError(text);
      }
      return absl::UnavailableError(text);
    }
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  at::Tensor tensor_;  // kept alive while Gloo reads or writes it
  std::string description_;
};

absl::Status CheckCpuTensor(absl::string_view operation,
                            const at::Tensor& tensor) {
  if (!tensor.defined() || !tensor.device().is_cpu() ||
      !tensor.is_contiguous() || tensor.is_sparse()) {
    return absl::InvalidArgumentError(absl::StrCat(
        operation, " needs a defined, dense, contiguous CPU tensor; got ",
        tensor.defined() ? tensor.toString() : "an undefined tensor"));
  }
  return absl::OkStatus();
}

// A blocking sum over a group's Gloo process group: the reducer's way when
// the group's members are not all on one host.
GroupAllReducer::Sum TcpSum(ProcessGroup group, std::string description,
                            absl::Duration timeout) {
  return [group = std::move(group), description = std::move(description),
          timeout](const at::Tensor& tensor) -> absl::Status {
    std::vector<at::Tensor> tensors = {tensor};
    try {
      return GlooPendingOp(group->allreduce(tensors), tensor, description)
          .Wait(timeout);
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat(description, " failed: ", TorchErrorMessage(e)));
    }
  };
}

absl::StatusOr<ProcessGroup> JoinProcessGroup(
    const c10::intrusive_ptr<c10d::Store>& store, absl::string_view prefix,
    int rank, int size, const GlooOptions& options) {
  try {
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(
        absl::ToChronoMilliseconds(options.timeout));
    gloo_options->devices.push_back(
        c10d::ProcessGroupGloo::createDeviceForHostname(options.host));
    return c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>(std::string(prefix), store),
        rank, size, gloo_options);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "rank ", options.rank, " could not join process group '", prefix, "' (",
        size, " ranks) within ", absl::FormatDuration(options.timeout), ": ",
        TorchErrorMessage(e)));
  }
}

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(int rank, int world_size, ProcessGroup world,
                   std::map<std::string, std::unique_ptr<GroupAllReducer>,
                            std::less<>>
                       reducers)
      : rank_(rank),
        world_size_(world_size),
        world_(std::move(world)),
        reducers_(std::move(reducers)) {}

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }

  absl::StatusOr<std::unique_ptr<PendingOp>> Send(const at::Tensor& tensor,
                                                  int peer,
                                                  int64_t tag) override {
    return PointToPoint("send", tensor, peer, tag);
  }

  absl::StatusOr<std::unique_ptr<PendingOp>> Recv(const at::Tensor& tensor,
                                                  int peer,
                                                  int64_t tag) override {
    return PointToPoint("recv", tensor, peer, tag);
  }

  absl::StatusOr<std::unique_ptr<PendingOp>> AllReduceSum(
      const at::Tensor& tensor, absl::string_view group) override {
    RETURN_IF_ERROR(CheckCpuTensor("allreduce", tensor));
    ASSIGN_OR_RETURN(const std::unique_ptr<GroupAllReducer>* reducer,
                     comm_internal::FindGroup(reducers_, group, rank_));
    return (*reducer)->Start(tensor);
  }

  absl::Status Barrier(absl::Duration timeout) override {
    c10d::BarrierOptions barrier_options;
    barrier_options.timeout = absl::ToChronoMilliseconds(timeout);
    try {
      return GlooPendingOp(world_->barrier(barrier_options), at::Tensor(),
                           "barrier of all ranks")
          .Wait(timeout);
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat("barrier of all ranks failed: ", TorchErrorMessage(e)));
    }
  }

 private:
  static std::unique_ptr<PendingOp> Pending(c10::intrusive_ptr<c10d::Work> work,
                                            const at::Tensor& tensor,
                                            std::string description) {
    return std::make_unique<GlooPendingOp>(std::move(work), tensor,
                                           std::move(description));
  }

  absl::StatusOr<std::unique_ptr<PendingOp>> PointToPoint(
      absl::string_view operation, const at::Tensor& tensor, int peer,
      int64_t tag) {
    RETURN_IF_ERROR(comm_internal::CheckPeerAndTag(operation, peer, tag, rank_,
                                                   world_size_));
    RETURN_IF_ERROR(CheckCpuTensor(operation, tensor));
    const std::string description =
        comm_internal::DescribeP2p(operation, peer, tag);
    std::vector<at::Tensor> tensors = {tensor};
    try {
      const int gloo_tag = static_cast<int>(tag);
      return Pending(operation == "send"
                         ? world_->send(tensors, peer, gloo_tag)
                         : world_->recv(tensors, peer, gloo_tag),
                     tensor, description);
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat(description, " failed: ", TorchErrorMessage(e)));
    }
  }

  const int rank_;
  const int world_size_;
  const ProcessGroup world_;
  std::map<std::string, std::unique_ptr<GroupAllReducer>, std::less<>>
      reducers_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateGlooCommunicator(
    const TcpRendezvous& rendezvous, const GlooOptions& options) {
  if (options.world_size < 1 || options.rank < 0 ||
      options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank is ", options.rank, " of world size ",
                     options.world_size, "; need 0 <= rank < world size"));
  }
  RETURN_IF_ERROR(ValidateCommGroups(options.groups, options.world_size));
  const c10::intrusive_ptr<c10d::Store> store = rendezvous.store();
  ASSIGN_OR_RETURN(ProcessGroup world,
                   JoinProcessGroup(store, kWorldPrefix, options.rank,
                                    options.world_size, options));
  std::map<std::string, std::unique_ptr<GroupAllReducer>, std::less<>>
      reducers;
  for (const CommGroup& group : options.groups) {
    const auto member =
        std::find(group.ranks.begin(), group.ranks.end(), options.rank);
    if (member == group.ranks.end()) continue;
    GroupAllReducerOptions reducer_options;
    reducer_options.store = store;
    reducer_options.key_prefix = absl::StrCat(kSharedMemoryPrefix, group.name);
    reducer_options.rank = static_cast<int>(member - group.ranks.begin());
    reducer_options.size = static_cast<int>(group.ranks.size());
    reducer_options.shared_memory = options.shared_memory;
    reducer_options.timeout = options.timeout;
    reducer_options.description =
        absl::StrCat("allreduce in group '", group.name, "'");
    ASSIGN_OR_RETURN(
        ProcessGroup process_group,
        JoinProcessGroup(store, absl::StrCat(kGroupPrefix, group.name),
                         reducer_options.rank, reducer_options.size, options));
    reducers[group.name] = std::make_unique<GroupAllReducer>(
        reducer_options, TcpSum(std::move(process_group),
                                reducer_options.description, options.timeout));
  }
  return std::make_unique<GlooCommunicator>(
      options.rank, options.world_size, std::move(world), std::move(reducers));
}

}  // namespace chimera::worker
