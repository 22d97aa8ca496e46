#include "worker/comm/gloo_communicator.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <map>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/comm/group_collectives.h"
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

// The number of elements each of `members` owns of a buffer of `elements`.
std::vector<int64_t> ShardSizes(int64_t elements, int members) {
  std::vector<int64_t> sizes;
  for (int m = 0; m < members; ++m) {
    sizes.push_back(ShardOf(elements, m, members).size());
  }
  return sizes;
}

// Starts a collective over the group's Gloo process group. Gloo's
// all-to-all of uneven pieces carries both sharded ones (its all-gather
// needs even pieces, and c10d's Gloo has no reduce-scatter): each member
// sends every other member one piece, which moves the bytes of a ring
// all-gather or reduce-scatter.
c10::intrusive_ptr<c10d::Work> StartOverGloo(c10d::ProcessGroupGloo& group,
                                             Collective collective,
                                             const at::Tensor& flat,
                                             at::Tensor& received) {
  if (collective == Collective::kSum) {
    std::vector<at::Tensor> tensors = {flat};
    return group.allreduce(tensors);
  }
  const int members = group.getSize();
  std::vector<int64_t> shard_sizes = ShardSizes(flat.numel(), members);
  const ShardRange own = ShardOf(flat.numel(), group.getRank(), members);
  std::vector<int64_t> own_sizes(members, own.size());
  if (collective == Collective::kAllGather) {
    // This member's shard to every member, every member's into `flat`.
    at::Tensor copies = flat.narrow(0, own.begin, own.size()).repeat(members);
    at::Tensor output = flat;
    return group.alltoall_base(output, copies, shard_sizes, own_sizes);
  }
  // The reduce-scatter: member m's shard of `flat` to member m, every
  // member's copy of this member's shard into `received`.
  received = at::empty({members * own.size()}, flat.options());
  at::Tensor input = flat;
  return group.alltoall_base(received, input, own_sizes, shard_sizes);
}

// Sums the members' copies of this member's shard, received one after the
// other, into the shard, in member order like the shared-memory path.
void SumReceivedShards(const at::Tensor& flat, const at::Tensor& received,
                       int member, int members) {
  const ShardRange own = ShardOf(flat.numel(), member, members);
  at::Tensor shard = flat.narrow(0, own.begin, own.size());
  const at::Tensor copies = received.view({members, own.size()});
  shard.copy_(copies[0]);
  for (int m = 1; m < members; ++m) shard.add_(copies[m]);
}

// The group's collectives over its Gloo process group, blocking: its way
// when the group's members are not all on one host.
GroupCollectives::Run OverGloo(ProcessGroup group, std::string name,
                               absl::Duration timeout) {
  return [group = std::move(group), name = std::move(name), timeout](
             Collective collective, const at::Tensor& tensor) -> absl::Status {
    const std::string description = DescribeCollective(collective, name);
    const at::Tensor flat = tensor.view({-1});
    at::Tensor received;
    try {
      RETURN_IF_ERROR(
          GlooPendingOp(StartOverGloo(*group, collective, flat, received),
                        tensor, description)
              .Wait(timeout));
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat(description, " failed: ", TorchErrorMessage(e)));
    }
    if (collective == Collective::kReduceScatterSum) {
      SumReceivedShards(flat, received, group->getRank(), group->getSize());
    }
    return absl::OkStatus();
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
  GlooCommunicator(
      int rank, int world_size, ProcessGroup world,
      std::map<std::string, std::unique_ptr<GroupCollectives>, std::less<>>
          groups)
      : rank_(rank),
        world_size_(world_size),
        world_(std::move(world)),
        groups_(std::move(groups)) {}

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
    return StartCollective(Collective::kSum, tensor, group);
  }

  absl::StatusOr<std::unique_ptr<PendingOp>> AllGather(
      const at::Tensor& buffer, absl::string_view group) override {
    return StartCollective(Collective::kAllGather, buffer, group);
  }

  absl::StatusOr<std::unique_ptr<PendingOp>> ReduceScatterSum(
      const at::Tensor& buffer, absl::string_view group) override {
    return StartCollective(Collective::kReduceScatterSum, buffer, group);
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

  absl::StatusOr<std::unique_ptr<PendingOp>> StartCollective(
      Collective collective, const at::Tensor& tensor,
      absl::string_view group) {
    RETURN_IF_ERROR(
        CheckCpuTensor(DescribeCollective(collective, group), tensor));
    ASSIGN_OR_RETURN(const std::unique_ptr<GroupCollectives>* collectives,
                     comm_internal::FindGroup(groups_, group, rank_));
    return (*collectives)->Start(collective, tensor);
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
  std::map<std::string, std::unique_ptr<GroupCollectives>, std::less<>> groups_;
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
  std::map<std::string, std::unique_ptr<GroupCollectives>, std::less<>>
      collectives;
  for (const CommGroup& group : options.groups) {
    const auto member =
        std::find(group.ranks.begin(), group.ranks.end(), options.rank);
    if (member == group.ranks.end()) continue;
    GroupCollectivesOptions group_options;
    group_options.store = store;
    group_options.key_prefix = absl::StrCat(kSharedMemoryPrefix, group.name);
    group_options.rank = static_cast<int>(member - group.ranks.begin());
    group_options.size = static_cast<int>(group.ranks.size());
    group_options.shared_memory = options.shared_memory;
    group_options.timeout = options.timeout;
    group_options.group = group.name;
    ASSIGN_OR_RETURN(
        ProcessGroup process_group,
        JoinProcessGroup(store, absl::StrCat(kGroupPrefix, group.name),
                         group_options.rank, group_options.size, options));
    collectives[group.name] = std::make_unique<GroupCollectives>(
        group_options,
        OverGloo(std::move(process_group), group.name, options.timeout));
  }
  return std::make_unique<GlooCommunicator>(options.rank, options.world_size,
                                            std::move(world),
                                            std::move(collectives));
}

}  // namespace chimera::worker
