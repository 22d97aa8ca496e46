// The CPU communicator: LibTorch's c10d::ProcessGroupGloo over TCP. One
// process group of all ranks carries point-to-point transfers (Gloo matches
// them by peer and tag, in any order). Each gradient group this rank belongs
// to has a thread for its collectives (group_collectives.h), so those of
// different stages proceed independently: they run through shared memory
// when all of the group's members run on one host, else over the group's own
// Gloo process group (the sharded ones as an all-to-all). Every group
// rendezvouses through the same store under its own key prefix, with
// group-local ranks.
//
//   GlooOptions options;
//   options.rank = rank;
//   options.world_size = 4;
//   options.groups = {{"stage0", {0, 3}}, {"stage1", {1, 2}}};
//   ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
//                    CreateGlooCommunicator(*rendezvous, options));
//
// Tensors must be CPU tensors. Creation blocks until every member of every
// group this rank joins has arrived, or options.timeout.
#ifndef CHIMERA_WORKER_COMM_GLOO_COMMUNICATOR_H_
#define CHIMERA_WORKER_COMM_GLOO_COMMUNICATOR_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/comm/communicator.h"
#include "worker/comm/tcp_rendezvous.h"

namespace chimera::worker {

struct GlooOptions {
  int rank = 0;
  int world_size = 1;
  // The job's gradient groups, the same list on every rank.
  std::vector<CommGroup> groups;
  // The address of this host that the other ranks reach it at; Gloo listens
  // there on an ephemeral port and publishes it through the store.
  std::string host = "127.0.0.1";
  // Bounds joining the groups and any one operation inside Gloo, whatever
  // Wait() is given, and so how long a failed job's teardown can block.
  absl::Duration timeout = kDefaultCollectiveTimeout;
  // False: this rank declines shared-memory allreduce, and so every group it
  // is in sums over TCP.
  bool shared_memory = true;
};

// INVALID_ARGUMENT for a bad rank, world size or group list; UNAVAILABLE
// naming the group when a member does not arrive in time.
absl::StatusOr<std::unique_ptr<Communicator>> CreateGlooCommunicator(
    const TcpRendezvous& rendezvous, const GlooOptions& options);

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_COMM_GLOO_COMMUNICATOR_H_
