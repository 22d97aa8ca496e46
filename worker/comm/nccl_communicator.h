// The GPU communicator: NCCL. Every channel of the job (a p2p link and lane,
// see communicator.h) gets a two-rank NCCL communicator and a CUDA stream of
// its own on both ends, and so does every gradient group and the world
// (barriers). No operation queues behind another one's: a send waits for
// nothing but its own receiver, and the allreduces of two groups overlap each
// other, the transfers and the compute. That matches the blocking rules the
// schedule validator proves programs against (sends and allreduce begins
// never block). Unique ids travel through the rendezvous store: rank 0
// creates the world's, a link's sender creates the link's.
//
//   NcclOptions options;
//   options.rank = rank;
//   options.world_size = 4;
//   options.device = local_gpu;
//   options.groups = {{"stage0", {0, 3}}, {"stage1", {1, 2}}};
//   options.links = P2pLinks(rank_schedule.program);
//   ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
//                    CreateNcclCommunicator(*rendezvous, options));
//
// Contracts beyond communicator.h:
// - Tensors must be contiguous CUDA tensors on options.device (NCCL reads
//   device memory; CPU tensors are refused, not copied).
// - Transfers go over options.links only; a send or receive between ranks
//   that are not linked is INVALID_ARGUMENT.
// - An operation starts after all work queued so far on the legacy default
//   CUDA stream (LibTorch's default stream), which produces the tensor.
//   PendingOp::Wait() is a host wait; work queued after it sees the result.
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
  // The p2p links this rank is on (others are ignored): each is listed by
  // both its ranks.
  std::vector<P2pLink> links;
  // Bounds joining (fetching the unique ids, initialising the NCCL
  // communicators) and the queuing of each operation on a communicator.
  absl::Duration timeout = kDefaultConnectTimeout;
};

// FAILED_PRECONDITION when CUDA reports no usable device; INVALID_ARGUMENT
// for a bad rank, device or group list; DEADLINE_EXCEEDED or UNAVAILABLE
// when the other ranks do not join.
absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(
    const TcpRendezvous& rendezvous, const NcclOptions& options);

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_COMM_NCCL_COMMUNICATOR_H_
