#include "worker/comm/nccl_communicator.h"

#include <ATen/core/Tensor.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/comm/torch_error.h"

namespace chimera::worker {
namespace {

constexpr absl::string_view kUniqueIdKey = "chimera/nccl/unique_id";
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

class NcclCommunicator final : public Communicator {
 public:
  explicit NcclCommunicator(const NcclOptions& options) : options_(options) {}

  ~NcclCommunicator() override {
    // Abort rather than destroy: it never blocks on a peer that is gone.
    for (auto& [name, comm] : groups_) ncclCommAbort(comm);
    if (world_ != nullptr) ncclCommAbort(world_);
    for (cudaStream_t stream : {p2p_stream_, allreduce_stream_}) {
      if (stream != nullptr) cudaStreamDestroy(stream);
    }
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
    for (cudaStream_t* stream : {&p2p_stream_, &allreduce_stream_}) {
      if (cudaError_t error =
              cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking);
          error != cudaSuccess) {
        return CudaError(error, "cudaStreamCreateWithFlags");
      }
    }
    const absl::Time deadline = absl::Now() + options_.connect_timeout;
    ASSIGN_OR_RETURN(const ncclUniqueId id, ShareUniqueId(store));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // every wait below is bounded by the deadline
    const std::string joining =
        absl::StrCat("rank ", options_.rank, " joining NCCL (",
                     options_.world_size, " ranks)");
    if (ncclResult_t result = ncclCommInitRankConfig(
            &world_, options_.world_size, id, options_.rank, &config);
        result != ncclSuccess && result != ncclInProgress) {
      return NcclError(result, joining);
    }
    RETURN_IF_ERROR(AwaitComm(world_, deadline, joining));
    return SplitGroups(config, deadline);
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
    ASSIGN_OR_RETURN(ncclComm_t comm,
                     comm_internal::FindGroup(groups_, group, options_.rank));
    ASSIGN_OR_RETURN(const ncclDataType_t type, NcclType(tensor));
    return Enqueue(comm, allreduce_stream_, tensor,
                   absl::StrCat("allreduce in group '", group, "'"), [&] {
                     return ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(),
                                          tensor.numel(), type, ncclSum, comm,
                                          allreduce_stream_);
                   });
  }

  absl::Status Barrier(absl::Duration timeout) override {
    // NCCL has no barrier: an allreduce of one value over all ranks is one.
    ASSIGN_OR_RETURN(
        std::unique_ptr<PendingOp> op,
        Enqueue(world_, p2p_stream_, at::Tensor(), "barrier of all ranks", [&] {
          return ncclAllReduce(barrier_value_, barrier_value_, 1, ncclInt32,
                               ncclSum, world_, p2p_stream_);
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

  // Rank 0 creates the id and publishes it; the others read it (the store's
  // get waits at most the rendezvous timeout).
  absl::StatusOr<ncclUniqueId> ShareUniqueId(c10d::Store& store) {
    ncclUniqueId id;
    try {
      if (options_.rank == 0) {
        if (ncclResult_t result = ncclGetUniqueId(&id); result != ncclSuccess) {
          return NcclError(result, "ncclGetUniqueId");
        }
        const auto* bytes = reinterpret_cast<const uint8_t*>(&id);
        store.set(std::string(kUniqueIdKey),
                  std::vector<uint8_t>(bytes, bytes + sizeof(id)));
        return id;
      }
      const std::vector<uint8_t> bytes = store.get(std::string(kUniqueIdKey));
      if (bytes.size() != sizeof(id)) {
        return absl::DataLossError(
            absl::StrCat("the NCCL unique id in the store has ", bytes.size(),
                         " bytes; expected ", sizeof(id)));
      }
      std::memcpy(&id, bytes.data(), sizeof(id));
      return id;
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat("rank ", options_.rank,
                       " could not share the NCCL unique id through the "
                       "rendezvous store: ",
                       TorchErrorMessage(e)));
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
      ncclComm_t comm = nullptr;
      const std::string what =
          absl::StrCat("creating NCCL group '", group.name, "'");
      if (ncclResult_t result = ncclCommSplit(
              world_, member ? static_cast<int>(color) : NCCL_SPLIT_NOCOLOR,
              options_.rank, &comm, &config);
          result != ncclSuccess && result != ncclInProgress) {
        return NcclError(result, what);
      }
      RETURN_IF_ERROR(AwaitComm(world_, deadline, what));
      if (member) groups_[group.name] = comm;
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
    return Enqueue(world_, p2p_stream_, tensor,
                   comm_internal::DescribeP2p(operation, peer, tag), [&] {
                     return send ? ncclSend(tensor.data_ptr(), tensor.numel(),
                                            type, peer, world_, p2p_stream_)
                                 : ncclRecv(tensor.data_ptr(), tensor.numel(),
                                            type, peer, world_, p2p_stream_);
                   });
  }

  // Queues `call` on `stream` after the default stream's work, in its own
  // NCCL group, and records an event that marks its completion.
  template <typename Call>
  absl::StatusOr<std::unique_ptr<PendingOp>> Enqueue(ncclComm_t comm,
                                                     cudaStream_t stream,
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
    cudaStreamWaitEvent(stream, ready, 0);
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
    if (absl::Status queued =
            AwaitComm(comm, absl::Now() + kDefaultP2pTimeout, description);
        !queued.ok()) {
      cudaEventDestroy(done);
      return queued;
    }
    cudaEventRecord(done, stream);
    return std::make_unique<NcclPendingOp>(comm, done, tensor,
                                           std::move(description));
  }

  const NcclOptions options_;
  ncclComm_t world_ = nullptr;
  std::map<std::string, ncclComm_t, std::less<>> groups_;
  cudaStream_t p2p_stream_ = nullptr;
  cudaStream_t allreduce_stream_ = nullptr;
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
  auto communicator = std::make_unique<NcclCommunicator>(options);
  RETURN_IF_ERROR(communicator->Init(*rendezvous.store()));
  return communicator;
}

}  // namespace chimera::worker
