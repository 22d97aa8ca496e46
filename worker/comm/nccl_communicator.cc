#include "worker/comm/nccl_communicator.h"

#include <ATen/core/Tensor.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/comm/torch_error.h"

namespace chimera::worker {
namespace {

// How often a waiting host thread polls CUDA events and NCCL's error state.
constexpr absl::Duration kPollInterval = absl::Microseconds(50);

absl::Status CudaError(cudaError_t error, absl::string_view what) {
  return absl::UnavailableError(
      absl::StrCat(what, " failed: ", cudaGetErrorString(error)));
}

absl::Status NcclError(ncclResult_t result, absl::string_view what) {
  return absl::UnavailableError(
      absl::StrCat(what, " failed: ", ncclGetErrorString(result)));
}

// Polls a non-blocking NCCL communicator until its last call has finished
// (not ncclInProgress), failed, or the deadline passed.
absl::Status AwaitComm(ncclComm_t comm, absl::Time deadline,
                       absl::string_view what) {
  while (true) {
    ncclResult_t state = ncclSuccess;
    if (ncclResult_t result = ncclCommGetAsyncError(comm, &state);
        result != ncclSuccess) {
      return NcclError(result, what);
    }
    if (state == ncclSuccess) return absl::OkStatus();
    if (state != ncclInProgress) return NcclError(state, what);
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(what, " did not finish in time"));
    }
    absl::SleepFor(kPollInterval);
  }
}

absl::StatusOr<ncclDataType_t> NcclType(const at::Tensor& tensor) {
  switch (tensor.scalar_type()) {
    case at::kFloat:
      return ncclFloat32;
    case at::kDouble:
      return ncclFloat64;
    case at::kHalf:
      return ncclFloat16;
    case at::kBFloat16:
      return ncclBfloat16;
    case at::kInt:
      return ncclInt32;
    case at::kLong:
      return ncclInt64;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("NCCL cannot transfer tensors of dtype ",
                       c10::toString(tensor.scalar_type())));
  }
}

class NcclPendingOp final : public PendingOp {
 public:
  NcclPendingOp(ncclComm_t comm, cudaEvent_t done, at::Tensor tensor,
                std::string description)
      : comm_(comm),
        done_(done),
        tensor_(std::move(tensor)),
        description_(std::move(description)) {}
  ~NcclPendingOp() override { cudaEventDestroy(done_); }

  absl::Status Wait(absl::Duration timeout) override {
    const absl::Time deadline = absl::Now() + timeout;
    while (true) {
      const cudaError_t query = cudaEventQuery(done_);
      if (query == cudaSuccess) return absl::OkStatus();
      if (query != cudaErrorNotReady) {
        return CudaError(query, description_);
      }
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      if (state != ncclSuccess && state != ncclInProgress) {
        return NcclError(state, description_);
      }
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat(description_, " did not complete within ",
                         absl::FormatDuration(timeout)));
      }
      absl::SleepFor(kPollInterval);
    }
  }

 private:
  ncclComm_t comm_;
  cudaEvent_t done_;
  at::Tensor tensor_;  // kept alive while NCCL reads or writes it
  std::string description_;
};

// One NCCL communicator and the stream its operations run on.
struct Channel {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

// A p2p channel's identity: its link and lane.
using ChannelKey = std::tuple<int, int, int>;  // src, dst, lane

class NcclCommunicator final : public Communicator {
 public:
  explicit NcclCommunicator(const NcclOptions& options) : options_(options) {}

  ~NcclCommunicator() override {
    // Abort rather than destroy: it never blocks on a peer that is gone.
    auto release = [](Channel& channel) {
      if (channel.comm != nullptr) ncclCommAbort(channel.comm);
      if (channel.stream != nullptr) cudaStreamDestroy(channel.stream);
    };
    for (auto& [name, channel] : groups_) release(channel);
    for (auto& [key, channel] : links_) release(channel);
    release(world_);
    if (barrier_value_ != nullptr) cudaFree(barrier_value_);
  }

  absl::Status Init(c10d::Store& store) {
    RETURN_IF_ERROR(CheckCuda());
    if (cudaError_t error = cudaSetDevice(options_.device);
        error != cudaSuccess) {
      return CudaError(error,
                       absl::StrCat("cudaSetDevice(", options_.device, ")"));
    }
    if (cudaError_t error = cudaMalloc(&barrier_value_, sizeof(int));
        error != cudaSuccess) {
      return CudaError(error, "cudaMalloc of the barrier value");
    }
    const absl::Time deadline = absl::Now() + options_.timeout;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // every wait below is bounded by the deadline
    const std::string joining =
        absl::StrCat("rank ", options_.rank, " joining NCCL (",
                     options_.world_size, " ranks)");
    RETURN_IF_ERROR(CreateStream(world_));
    ASSIGN_OR_RETURN(
        const ncclUniqueId world_id,
        ShareUniqueId(store, "chimera/nccl/world", options_.rank == 0));
    if (ncclResult_t result =
            ncclCommInitRankConfig(&world_.comm, options_.world_size, world_id,
                                   options_.rank, &config);
        result != ncclSuccess && result != ncclInProgress) {
      return NcclError(result, joining);
    }
    RETURN_IF_ERROR(AwaitComm(world_.comm, deadline, joining));
    RETURN_IF_ERROR(SplitGroups(config, deadline));
    return ConnectLinks(store, config, deadline);
  }

  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }

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
    RETURN_IF_ERROR(CheckTensor("allreduce", tensor));
    ASSIGN_OR_RETURN(const Channel* channel_in_group,
                     comm_internal::FindGroup(groups_, group, options_.rank));
    const Channel channel = *channel_in_group;
    ASSIGN_OR_RETURN(const ncclDataType_t type, NcclType(tensor));
    return Enqueue(channel, tensor,
                   absl::StrCat("allreduce in group '", group, "'"), [&] {
                     return ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(),
                                          tensor.numel(), type, ncclSum,
                                          channel.comm, channel.stream);
                   });
  }

  // NCCL's all-gather and reduce-scatter need even shards; until these
  // collectives post their uneven pieces as grouped sends and receives, they
  // run as allreduces, at twice the bytes.
  absl::StatusOr<std::unique_ptr<PendingOp>> AllGather(
      const at::Tensor& buffer, absl::string_view group) override {
    RETURN_IF_ERROR(CheckTensor("all-gather", buffer));
    ASSIGN_OR_RETURN(const ShardRange own,
                     comm_internal::OwnShard(options_.groups, group,
                                             options_.rank, buffer.numel()));
    return comm_internal::AllGatherBySum(*this, buffer, group, own);
  }

  absl::StatusOr<std::unique_ptr<PendingOp>> ReduceScatterSum(
      const at::Tensor& buffer, absl::string_view group) override {
    return AllReduceSum(buffer, group);  // every shard summed, this one too
  }

  absl::Status Barrier(absl::Duration timeout) override {
    // NCCL has no barrier: an allreduce of one value over all ranks is one.
    ASSIGN_OR_RETURN(std::unique_ptr<PendingOp> op,
                     Enqueue(world_, at::Tensor(), "barrier of all ranks", [&] {
                       return ncclAllReduce(barrier_value_, barrier_value_, 1,
                                            ncclInt32, ncclSum, world_.comm,
                                            world_.stream);
                     }));
    return op->Wait(timeout);
  }

 private:
  absl::Status CheckCuda() {
    int devices = 0;
    if (cudaError_t error = cudaGetDeviceCount(&devices);
        error != cudaSuccess) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the NCCL communicator needs a CUDA device, but cudaGetDeviceCount "
          "failed: ",
          cudaGetErrorString(error)));
    }
    if (devices == 0) {
      return absl::FailedPreconditionError(
          "the NCCL communicator needs a CUDA device; this machine has none");
    }
    if (options_.device < 0 || options_.device >= devices) {
      return absl::InvalidArgumentError(
          absl::StrCat("CUDA device is ", options_.device,
                       "; this machine has devices [0, ", devices, ")"));
    }
    return absl::OkStatus();
  }

  static absl::Status CreateStream(Channel& channel) {
    if (cudaError_t error =
            cudaStreamCreateWithFlags(&channel.stream, cudaStreamNonBlocking);
        error != cudaSuccess) {
      return CudaError(error, "cudaStreamCreateWithFlags");
    }
    return absl::OkStatus();
  }

  // The creator makes the id and publishes it under `key`; the others read it
  // (the store's get waits at most the rendezvous timeout).
  absl::StatusOr<ncclUniqueId> ShareUniqueId(c10d::Store& store,
                                             const std::string& key,
                                             bool creator) {
    ncclUniqueId id;
    try {
      if (creator) {
        if (ncclResult_t result = ncclGetUniqueId(&id); result != ncclSuccess) {
          return NcclError(result, "ncclGetUniqueId");
        }
        const auto* bytes = reinterpret_cast<const uint8_t*>(&id);
        store.set(key, std::vector<uint8_t>(bytes, bytes + sizeof(id)));
        return id;
      }
      const std::vector<uint8_t> bytes = store.get(key);
      if (bytes.size() != sizeof(id)) {
        return absl::DataLossError(
            absl::StrCat("the NCCL unique id ", key, " in the store has ",
                         bytes.size(), " bytes; expected ", sizeof(id)));
      }
      std::memcpy(&id, bytes.data(), sizeof(id));
      return id;
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat(
          "rank ", options_.rank, " could not share the NCCL unique id ", key,
          " through the rendezvous store: ", TorchErrorMessage(e)));
    }
  }

  // Splitting is collective over all ranks: every rank calls it for every
  // group, in the list's order, with NCCL_SPLIT_NOCOLOR where not a member.
  absl::Status SplitGroups(ncclConfig_t& config, absl::Time deadline) {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
    for (size_t color = 0; color < options_.groups.size(); ++color) {
      const CommGroup& group = options_.groups[color];
      const bool member = std::binary_search(group.ranks.begin(),
                                             group.ranks.end(), options_.rank);
      Channel channel;
      const std::string what =
          absl::StrCat("creating NCCL group '", group.name, "'");
      if (ncclResult_t result = ncclCommSplit(
              world_.comm,
              member ? static_cast<int>(color) : NCCL_SPLIT_NOCOLOR,
              options_.rank, &channel.comm, &config);
          result != ncclSuccess && result != ncclInProgress) {
        return NcclError(result, what);
      }
      RETURN_IF_ERROR(AwaitComm(world_.comm, deadline, what));
      if (!member) continue;
      Channel& joined = groups_[group.name] = channel;
      // A non-blocking split may still be building the new communicator.
      RETURN_IF_ERROR(AwaitComm(joined.comm, deadline, what));
      RETURN_IF_ERROR(CreateStream(joined));
    }
    return absl::OkStatus();
#else
    if (options_.groups.empty()) return absl::OkStatus();
    return absl::UnimplementedError(absl::StrCat(
        "gradient groups need ncclCommSplit (NCCL 2.18 or newer); this build "
        "has NCCL ",
        NCCL_MAJOR, ".", NCCL_MINOR));
#endif
  }

  // Gives every lane of every link this rank is on a two-rank communicator
  // (the sender is its rank 0). All ids this rank creates are published
  // before it reads any, and the communicators are initialised in one NCCL
  // group, so the ranks can take their links in any order.
  absl::Status ConnectLinks(c10d::Store& store, ncclConfig_t& config,
                            absl::Time deadline) {
    std::vector<std::pair<ChannelKey, ncclUniqueId>> ids;
    for (const bool creating : {true, false}) {
      for (const P2pLink& link : options_.links) {
        if ((creating ? link.src : link.dst) != options_.rank) continue;
        for (int lane = 0; lane < kP2pLanes; ++lane) {
          ASSIGN_OR_RETURN(
              const ncclUniqueId id,
              ShareUniqueId(store,
                            absl::StrCat("chimera/nccl/link/", link.src, "-",
                                         link.dst, "/", lane),
                            creating));
          ids.emplace_back(ChannelKey{link.src, link.dst, lane}, id);
        }
      }
    }
    ncclGroupStart();
    for (const auto& [key, id] : ids) {
      Channel& channel = links_[key];
      const int link_rank = std::get<0>(key) == options_.rank ? 0 : 1;
      if (ncclResult_t result =
              ncclCommInitRankConfig(&channel.comm, 2, id, link_rank, &config);
          result != ncclSuccess && result != ncclInProgress) {
        ncclGroupEnd();
        return NcclError(result, DescribeLink(key));
      }
    }
    if (ncclResult_t result = ncclGroupEnd();
        result != ncclSuccess && result != ncclInProgress) {
      return NcclError(result, "connecting the p2p links");
    }
    for (auto& [key, channel] : links_) {
      RETURN_IF_ERROR(AwaitComm(channel.comm, deadline, DescribeLink(key)));
      RETURN_IF_ERROR(CreateStream(channel));
    }
    return absl::OkStatus();
  }

  static std::string DescribeLink(const ChannelKey& key) {
    return absl::StrCat("connecting the NCCL link from rank ", std::get<0>(key),
                        " to rank ", std::get<1>(key), " (lane ",
                        std::get<2>(key), ")");
  }

  absl::Status CheckTensor(absl::string_view operation,
                           const at::Tensor& tensor) const {
    if (!tensor.defined() || !tensor.is_cuda() || !tensor.is_contiguous() ||
        tensor.get_device() != options_.device) {
      return absl::InvalidArgumentError(absl::StrCat(
          operation, " needs a defined, contiguous CUDA tensor on device ",
          options_.device, "; got ",
          tensor.defined() ? tensor.toString() : "an undefined tensor",
          tensor.defined() ? absl::StrCat(" on ", tensor.device().str()) : ""));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<PendingOp>> PointToPoint(
      absl::string_view operation, const at::Tensor& tensor, int peer,
      int64_t tag) {
    RETURN_IF_ERROR(comm_internal::CheckPeerAndTag(
        operation, peer, tag, options_.rank, options_.world_size));
    RETURN_IF_ERROR(CheckTensor(operation, tensor));
    ASSIGN_OR_RETURN(const ncclDataType_t type, NcclType(tensor));
    const bool send = operation == "send";
    const ChannelKey key{send ? options_.rank : peer,
                         send ? peer : options_.rank, P2pLane(tag)};
    const auto it = links_.find(key);
    if (it == links_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(comm_internal::DescribeP2p(operation, peer, tag),
                       ": the job has no p2p link from rank ", std::get<0>(key),
                       " to rank ", std::get<1>(key)));
    }
    const Channel& channel = it->second;
    // On a link's own communicator the sender is rank 0, the receiver 1.
    return Enqueue(
        channel, tensor, comm_internal::DescribeP2p(operation, peer, tag), [&] {
          return send ? ncclSend(tensor.data_ptr(), tensor.numel(), type, 1,
                                 channel.comm, channel.stream)
                      : ncclRecv(tensor.data_ptr(), tensor.numel(), type, 0,
                                 channel.comm, channel.stream);
        });
  }

  // Queues `call` on the channel's stream after the default stream's work,
  // in its own NCCL group, and records an event that marks its completion.
  template <typename Call>
  absl::StatusOr<std::unique_ptr<PendingOp>> Enqueue(const Channel& channel,
                                                     const at::Tensor& tensor,
                                                     std::string description,
                                                     Call call) {
    cudaEvent_t ready = nullptr;
    cudaEvent_t done = nullptr;
    for (cudaEvent_t* event : {&ready, &done}) {
      if (cudaError_t error =
              cudaEventCreateWithFlags(event, cudaEventDisableTiming);
          error != cudaSuccess) {
        return CudaError(error, description);
      }
    }
    cudaEventRecord(ready, cudaStreamLegacy);
    cudaStreamWaitEvent(channel.stream, ready, 0);
    cudaEventDestroy(ready);
    ncclGroupStart();
    const ncclResult_t call_result = call();
    const ncclResult_t group_result = ncclGroupEnd();
    for (ncclResult_t result : {call_result, group_result}) {
      if (result != ncclSuccess && result != ncclInProgress) {
        cudaEventDestroy(done);
        return NcclError(result, description);
      }
    }
    // A non-blocking communicator may still be queuing the call.
    if (absl::Status queued = AwaitComm(
            channel.comm, absl::Now() + options_.timeout, description);
        !queued.ok()) {
      cudaEventDestroy(done);
      return queued;
    }
    cudaEventRecord(done, channel.stream);
    return std::make_unique<NcclPendingOp>(channel.comm, done, tensor,
                                           std::move(description));
  }

  const NcclOptions options_;
  Channel world_;
  std::map<std::string, Channel, std::less<>> groups_;
  std::map<ChannelKey, Channel> links_;
  int* barrier_value_ = nullptr;  // device memory
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(
    const TcpRendezvous& rendezvous, const NcclOptions& options) {
  if (options.world_size < 1 || options.rank < 0 ||
      options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank is ", options.rank, " of world size ",
                     options.world_size, "; need 0 <= rank < world size"));
  }
  RETURN_IF_ERROR(ValidateCommGroups(options.groups, options.world_size));
  RETURN_IF_ERROR(ValidateP2pLinks(options.links, options.world_size));
  auto communicator = std::make_unique<NcclCommunicator>(options);
  RETURN_IF_ERROR(communicator->Init(*rendezvous.store()));
  return communicator;
}

}  // namespace chimera::worker
