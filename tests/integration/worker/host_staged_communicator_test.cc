// The host-staged communicator over Gloo across real processes on loopback:
// what a rank sends is the tensor as it was at Send (the staged copy), and a
// received or reduced result reaches the caller's tensor when it waits, once,
// and so do the sharded collectives' results.
// On a CPU machine the tensors are CPU tensors, which it stages all the same.
#include "worker/comm/host_staged_communicator.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "tests/integration/worker/comm_checks.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/harness/forked_ranks.h"

namespace chimera::worker {
namespace {

using harness::RunForkedRanks;
using testing::ExpectAllRanksSucceeded;
using testing::ExpectFilledWith;

constexpr absl::Duration kTestDeadline = absl::Seconds(90);
constexpr absl::Duration kOpTimeout = absl::Seconds(30);

absl::StatusOr<std::unique_ptr<Communicator>> ConnectStaged(
    int rank, int world_size, TcpRendezvous& rendezvous) {
  GlooOptions options;
  options.rank = rank;
  options.world_size = world_size;
  options.groups = {{"all", {0, 1}}};
  options.timeout = kOpTimeout;
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> gloo,
                   CreateGlooCommunicator(rendezvous, options));
  return StageThroughHost(std::move(gloo));
}

TEST(HostStagedCommunicatorTest, SendTransfersTheTensorAsItWasWhenSent) {
  ExpectAllRanksSucceeded(RunForkedRanks(
      2, kTestDeadline,
      [](int rank, TcpRendezvous& rendezvous) -> absl::Status {
        ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                         ConnectStaged(rank, 2, rendezvous));
        if (rank == 0) {
          at::Tensor activations = at::full({64, 16}, 3.0, at::kDouble);
          ASSIGN_OR_RETURN(auto send, comm->Send(activations, 1, 5));
          // The staged copy is what travels, not the caller's tensor.
          activations.fill_(99.0);
          RETURN_IF_ERROR(send->Wait(kOpTimeout));
        } else {
          at::Tensor received = at::full({64, 16}, -1.0, at::kDouble);
          ASSIGN_OR_RETURN(auto recv, comm->Recv(received, 0, 5));
          RETURN_IF_ERROR(recv->Wait(kOpTimeout));
          RETURN_IF_ERROR(ExpectFilledWith(received, 3.0, "received"));
        }
        return comm->Barrier(kOpTimeout);
      }));
}

TEST(HostStagedCommunicatorTest, AllReduceResultReachesTheTensorOnceWaitedFor) {
  ExpectAllRanksSucceeded(RunForkedRanks(
      2, kTestDeadline,
      [](int rank, TcpRendezvous& rendezvous) -> absl::Status {
        ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                         ConnectStaged(rank, 2, rendezvous));
        at::Tensor gradients = at::full({1000}, rank + 1.0, at::kFloat);
        ASSIGN_OR_RETURN(auto sum, comm->AllReduceSum(gradients, "all"));
        RETURN_IF_ERROR(sum->Wait(kOpTimeout));
        RETURN_IF_ERROR(ExpectFilledWith(gradients, 3.0, "reduced"));
        // A second wait must not copy the staged sum over newer values.
        gradients.fill_(7.0);
        RETURN_IF_ERROR(sum->Wait(kOpTimeout));
        RETURN_IF_ERROR(
            ExpectFilledWith(gradients, 7.0, "after a second wait"));
        return comm->Barrier(kOpTimeout);
      }));
}

// The sharded collectives stage like the allreduce: rank r's shard of the
// reduce-scatter holds the sum, and the all-gather brings the other's.
TEST(HostStagedCommunicatorTest, ShardedCollectivesReachTheTensor) {
  ExpectAllRanksSucceeded(RunForkedRanks(
      2, kTestDeadline,
      [](int rank, TcpRendezvous& rendezvous) -> absl::Status {
        ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                         ConnectStaged(rank, 2, rendezvous));
        at::Tensor buffer = at::full({101}, rank + 1.0, at::kDouble);
        const ShardRange own = ShardOf(101, rank, 2);
        ASSIGN_OR_RETURN(auto scatter, comm->ReduceScatterSum(buffer, "all"));
        RETURN_IF_ERROR(scatter->Wait(kOpTimeout));
        RETURN_IF_ERROR(ExpectFilledWith(
            buffer.narrow(0, own.begin, own.size()), 3.0, "own shard"));
        buffer.narrow(0, own.begin, own.size()).fill_(rank);
        ASSIGN_OR_RETURN(auto gather, comm->AllGather(buffer, "all"));
        RETURN_IF_ERROR(gather->Wait(kOpTimeout));
        for (int m = 0; m < 2; ++m) {
          const ShardRange shard = ShardOf(101, m, 2);
          RETURN_IF_ERROR(
              ExpectFilledWith(buffer.narrow(0, shard.begin, shard.size()), m,
                               absl::StrCat("shard ", m)));
        }
        return comm->Barrier(kOpTimeout);
      }));
}

}  // namespace
}  // namespace chimera::worker
