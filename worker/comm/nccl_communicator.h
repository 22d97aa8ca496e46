// The GPU communicator: NCCL. One NCCL communicator of all ranks carries
// point-to-point transfers (ncclSend/ncclRecv, each in its own group call) on
// one CUDA stream; one more per gradient group, split from it, carries that
// group's ncclAllReduce on a second stream, so gradient sync overlaps the
// transfers and the compute. Rank 0 creates the NCCL unique id and hands it to
// the others through the rendezvous store.
//
//   NcclOptions options;
//   options.rank = rank;
//   options.world_size = 4;
//   options.device = local_gpu;
//   options.groups = {{"stage0", {0, 3}}, {"stage1", {1, 2}}};
//   ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
//                    CreateNcclCommunicator(*rendezvous, options));
//
// Contracts beyond communicator.h:
// - Tensors must be contiguous CUDA tensors on options.device (NCCL reads
//   device memory; CPU tensors are refused, not copied).
// - An operation starts after all work queued so far on the legacy default
//   CUDA stream (LibTorch's default stream), which produces the tensor.
//   PendingOp::Wait() is a host wait; work queued after it sees the result.
// - NCCL has no tags and runs one communicator's operations in issue order:
//   both sides of a peer pair must issue their sends and receives in the same
//   order. Tags only name the transfer in errors.
// - Built only with CHIMERA_HAVE_NCCL. Without a usable CUDA device creation
//   fails with FAILED_PRECONDITION.
#ifndef CHIMERA_WORKER_COMM_NCCL_COMMUNICATOR_H_
#define CHIMERA_WORKER_COMM_NCCL_COMMUNICATOR_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/comm/communicator.h"
#include "worker/comm/tcp_rendezvous.h"

namespace chimera::worker {

struct NcclOptions {
  int rank = 0;
  int world_size = 1;
  // CUDA device index this rank uses.
  int device = 0;
  // The job's gradient groups, the same list on every rank.
  std::vector<CommGroup> groups;
  // Bounds joining: fetching the unique id and initialising the NCCL
  // communicators.
  absl::Duration connect_timeout = kDefaultConnectTimeout;
};

// FAILED_PRECONDITION when CUDA reports no usable device; INVALID_ARGUMENT
// for a bad rank, device or group list; DEADLINE_EXCEEDED or UNAVAILABLE
// when the other ranks do not join.
absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(
    const TcpRendezvous& rendezvous, const NcclOptions& options);

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_COMM_NCCL_COMMUNICATOR_H_
