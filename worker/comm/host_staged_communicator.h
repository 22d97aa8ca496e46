// A communicator for device tensors over a host-memory transport: each
// transfer and collective copies its tensor into host memory, runs on the
// wrapped communicator (Gloo), and copies a received or reduced result back
// into the device tensor when the operation is waited for.
//
// It exists for ranks that share one GPU, which NCCL refuses (one NCCL rank
// per device and communicator): the pipeline then runs on that GPU with its
// transfers staged through the host. Each operation costs a device-to-host
// and, for receives and collectives, a host-to-device copy; several ranks on
// their own GPUs use NCCL instead.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Communicator> gloo,
//                    CreateGlooCommunicator(rendezvous, options));
//   std::unique_ptr<Communicator> comm = StageThroughHost(std::move(gloo));
//   comm->Send(cuda_tensor, peer, tag);
#ifndef CHIMERA_WORKER_COMM_HOST_STAGED_COMMUNICATOR_H_
#define CHIMERA_WORKER_COMM_HOST_STAGED_COMMUNICATOR_H_

#include <memory>

#include "worker/comm/communicator.h"

namespace chimera::worker {

// Wraps `host_transport`, a communicator of CPU tensors. Tensors given to the
// result may live on any device; they are staged even when on the CPU.
std::unique_ptr<Communicator> StageThroughHost(
    std::unique_ptr<Communicator> host_transport);

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_COMM_HOST_STAGED_COMMUNICATOR_H_
