// The Gloo communicator across real processes on loopback: tagged transfers
// in flight together and matched out of order, allreduce, reduce-scatter and
// all-gather within gradient groups, and failures (a silent peer, a dead peer,
// a rank that never joins) that end in a clear error within the timeout instead
// of a hang.
#include "worker/comm/gloo_communicator.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "tests/integration/worker/comm_checks.h"
#include "worker/harness/forked_ranks.h"

namespace chimera::worker {
namespace {

using harness::RankExit;
using harness::RunForkedRanks;
using testing::ExpectAllRanksSucceeded;
using testing::ExpectFilledWith;

// Whole test, all processes: generous, since two cores are shared.
constexpr absl::Duration kTestDeadline = absl::Seconds(90);
constexpr absl::Duration kOpTimeout = absl::Seconds(30);
// What the failure tests expect an error within.
constexpr absl::Duration kShortTimeout = absl::Seconds(2);

absl::StatusOr<std::unique_ptr<Communicator>> Connect(
    int rank, int world_size, TcpRendezvous& rendezvous,
    std::vector<CommGroup> groups = {}, absl::Duration timeout = kOpTimeout,
    bool shared_memory = true) {
  GlooOptions options;
  options.rank = rank;
  options.world_size = world_size;
  options.groups = std::move(groups);
  options.timeout = timeout;
  options.shared_memory = shared_memory;
  return CreateGlooCommunicator(rendezvous, options);
}

// Value of the transfer from `source` with `tag`, so a mismatch shows.
double Payload(int source, int tag) { return 100.0 * source + tag; }

constexpr int kTags = 6;

// Ranks 0 and 2 each send rank 1 six tensors of different sizes (all in
// flight at once); rank 1 posts its receives in reverse tag order and
// alternating between senders, then answers rank 0 with tag 0.
TEST(GlooCommunicatorTest, TaggedTransfersInFlightMatchOutOfOrder) {
  ExpectAllRanksSucceeded(RunForkedRanks(
      3, kTestDeadline,
      [](int rank, TcpRendezvous& rendezvous) -> absl::Status {
        ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                         Connect(rank, 3, rendezvous));
        std::vector<std::unique_ptr<PendingOp>> ops;
        std::vector<at::Tensor> buffers;
        if (rank == 1) {
          for (int tag = kTags - 1; tag >= 0; --tag) {
            for (int source : {2, 0}) {
              buffers.push_back(at::empty({tag + 1, 3}, at::kFloat));
              ASSIGN_OR_RETURN(ops.emplace_back(),
                               comm->Recv(buffers.back(), source, tag));
            }
          }
          for (auto& op : ops) RETURN_IF_ERROR(op->Wait(kOpTimeout));
          for (int i = 0; i < 2 * kTags; ++i) {
            const int tag = kTags - 1 - i / 2;
            const int source = i % 2 == 0 ? 2 : 0;
            RETURN_IF_ERROR(ExpectFilledWith(
                buffers[i], Payload(source, tag),
                absl::StrCat("from rank ", source, " tag ", tag)));
          }
          ASSIGN_OR_RETURN(auto reply,
                           comm->Send(at::full({4}, 7.0, at::kDouble), 0, 0));
          RETURN_IF_ERROR(reply->Wait(kOpTimeout));
          return comm->Barrier(kOpTimeout);
        }
        for (int tag = 0; tag < kTags; ++tag) {
          buffers.push_back(
              at::full({tag + 1, 3}, Payload(rank, tag), at::kFloat));
          ASSIGN_OR_RETURN(ops.emplace_back(),
                           comm->Send(buffers.back(), 1, tag));
        }
        if (rank == 0) {
          at::Tensor reply = at::zeros({4}, at::kDouble);
          ASSIGN_OR_RETURN(auto receive, comm->Recv(reply, 1, 0));
          RETURN_IF_ERROR(receive->Wait(kOpTimeout));
          RETURN_IF_ERROR(ExpectFilledWith(reply, 7.0, "reply"));
        }
        for (auto& op : ops) RETURN_IF_ERROR(op->Wait(kOpTimeout));
        return comm->Barrier(kOpTimeout);
      }));
}

// Two pair groups allreduce at the same time, then the group of all four.
absl::Status SumWithinGroups(int rank, TcpRendezvous& rendezvous,
                             bool shared_memory) {
  ASSIGN_OR_RETURN(
      std::unique_ptr<Communicator> comm,
      Connect(rank, 4, rendezvous,
              {{"even", {0, 2}}, {"odd", {1, 3}}, {"all", {0, 1, 2, 3}}},
              kOpTimeout, shared_memory));
  const at::Tensor pair = at::full({1000}, rank + 1.0, at::kDouble);
  const at::Tensor all = at::full({3, 5}, rank + 1.0, at::kFloat);
  ASSIGN_OR_RETURN(auto pair_op,
                   comm->AllReduceSum(pair, rank % 2 ? "odd" : "even"));
  ASSIGN_OR_RETURN(auto all_op, comm->AllReduceSum(all, "all"));
  RETURN_IF_ERROR(pair_op->Wait(kOpTimeout));
  RETURN_IF_ERROR(all_op->Wait(kOpTimeout));
  // even: 1 + 3, odd: 2 + 4; all: 1 + 2 + 3 + 4.
  RETURN_IF_ERROR(
      ExpectFilledWith(pair, rank % 2 ? 6.0 : 4.0, "pair group sum"));
  RETURN_IF_ERROR(ExpectFilledWith(all, 10.0, "all-ranks sum"));
  const auto stranger = comm->AllReduceSum(pair, rank % 2 ? "even" : "odd");
  if (stranger.status().code() != absl::StatusCode::kNotFound) {
    return absl::InternalError(
        absl::StrCat("allreduce in a group without this rank: ",
                     stranger.status().ToString()));
  }
  return comm->Barrier(kOpTimeout);
}

// All four ranks share this host, so every group sums in shared memory.
TEST(GlooCommunicatorTest, AllReduceSumsWithinEachGroupOnly) {
  ExpectAllRanksSucceeded(RunForkedRanks(
      4, kTestDeadline, [](int rank, TcpRendezvous& rendezvous) {
        return SumWithinGroups(rank, rendezvous, /*shared_memory=*/true);
      }));
}

// Rank 3 declines shared memory: groups "odd" and "all" sum over Gloo's TCP,
// "even" still in shared memory, each correctly.
TEST(GlooCommunicatorTest, GroupsWithARankThatDeclinesSharedMemorySumOverTcp) {
  ExpectAllRanksSucceeded(RunForkedRanks(
      4, kTestDeadline, [](int rank, TcpRendezvous& rendezvous) {
        return SumWithinGroups(rank, rendezvous,
                               /*shared_memory=*/rank != 3);
      }));
}

// Reduce-scatters and then all-gathers 1001 elements in a group of three
// and in a pair (uneven shards): after the reduce-scatter this member's shard
// holds the group's sum, after the gather every element does. Then the
// gather that transports without one of uneven shards use (AllGatherBySum).
absl::Status ShardWithinGroups(int rank, TcpRendezvous& rendezvous,
                               bool shared_memory) {
  ASSIGN_OR_RETURN(
      std::unique_ptr<Communicator> comm,
      Connect(rank, 3, rendezvous, {{"all", {0, 1, 2}}, {"low", {0, 1}}},
              kOpTimeout, shared_memory));
  constexpr int64_t kNumel = 1001;
  const at::Tensor counting = at::arange(kNumel, at::kDouble);
  struct Case {
    const char* group;
    int members;
    double factor_sum;  // of the members' factors rank + 1
    at::ScalarType dtype;
  };
  for (const Case& c :
       {Case{"all", 3, 6.0, at::kDouble}, Case{"low", 2, 3.0, at::kFloat}}) {
    if (rank >= c.members) continue;
    const at::Tensor expected = (counting * c.factor_sum).to(c.dtype);
    const ShardRange own = ShardOf(kNumel, rank, c.members);
    at::Tensor buffer = (counting * (rank + 1.0)).to(c.dtype);
    ASSIGN_OR_RETURN(auto scatter, comm->ReduceScatterSum(buffer, c.group));
    RETURN_IF_ERROR(scatter->Wait(kOpTimeout));
    if (!at::equal(buffer.narrow(0, own.begin, own.size()),
                   expected.narrow(0, own.begin, own.size()))) {
      return absl::InternalError(absl::StrCat(
          "group ", c.group, ": the own shard is not the group's sum"));
    }
    buffer.narrow(0, 0, own.begin).fill_(-1);
    buffer.narrow(0, own.end, kNumel - own.end).fill_(-1);
    ASSIGN_OR_RETURN(auto gather, comm->AllGather(buffer, c.group));
    RETURN_IF_ERROR(gather->Wait(kOpTimeout));
    if (!at::equal(buffer, expected)) {
      return absl::InternalError(
          absl::StrCat("group ", c.group, ": the gathered buffer differs"));
    }
    buffer.narrow(0, own.begin, own.size()).fill_(rank);
    ASSIGN_OR_RETURN(auto by_sum, comm_internal::AllGatherBySum(*comm, buffer,
                                                                c.group, own));
    RETURN_IF_ERROR(by_sum->Wait(kOpTimeout));
    for (int m = 0; m < c.members; ++m) {
      const ShardRange shard = ShardOf(kNumel, m, c.members);
      RETURN_IF_ERROR(ExpectFilledWith(
          buffer.narrow(0, shard.begin, shard.size()), m,
          absl::StrCat("group ", c.group, ", shard ", m, " gathered by sum")));
    }
  }
  if (rank == 2 && comm->AllGather(counting, "low").status().code() !=
                       absl::StatusCode::kNotFound) {
    return absl::InternalError("all-gather in a group without this rank");
  }
  return comm->Barrier(kOpTimeout);
}

TEST(GlooCommunicatorTest, ShardedCollectivesThroughSharedMemory) {
  ExpectAllRanksSucceeded(
      RunForkedRanks(3, kTestDeadline, [](int rank, TcpRendezvous& rendezvous) {
        return ShardWithinGroups(rank, rendezvous, /*shared_memory=*/true);
      }));
}

// Rank 0 declines shared memory, so both groups run over Gloo's TCP.
TEST(GlooCommunicatorTest, ShardedCollectivesOverTcp) {
  ExpectAllRanksSucceeded(
      RunForkedRanks(3, kTestDeadline, [](int rank, TcpRendezvous& rendezvous) {
        return ShardWithinGroups(rank, rendezvous,
                                 /*shared_memory=*/rank != 0);
      }));
}

// Rank 1 joins but never sends: rank 0's receive must fail after its short
// timeout, naming the peer and the tag.
TEST(GlooCommunicatorTest, ReceiveFromSilentPeerTimesOutNamingIt) {
  ExpectAllRanksSucceeded(RunForkedRanks(
      2, kTestDeadline,
      [](int rank, TcpRendezvous& rendezvous) -> absl::Status {
        ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                         Connect(rank, 2, rendezvous));
        if (rank == 1) {
          // Stay connected well past rank 0's timeout.
          absl::SleepFor(3 * kShortTimeout);
          return absl::OkStatus();
        }
        at::Tensor buffer = at::empty({8}, at::kFloat);
        ASSIGN_OR_RETURN(auto op, comm->Recv(buffer, 1, 42));
        const absl::Time start = absl::Now();
        const absl::Status status = op->Wait(kShortTimeout);
        const absl::Duration waited = absl::Now() - start;
        if (status.code() != absl::StatusCode::kDeadlineExceeded ||
            !absl::StrContains(status.message(), "recv from rank 1 (tag 42)")) {
          return absl::InternalError(
              absl::StrCat("unexpected result: ", status.ToString()));
        }
        if (waited > 2 * kShortTimeout) {
          return absl::InternalError(absl::StrCat(
              "timed out only after ", absl::FormatDuration(waited)));
        }
        return absl::OkStatus();
      }));
}

// Rank 1 exits once connected: rank 0's receive from it, and an allreduce
// with it, fail within the timeout rather than hang.
TEST(GlooCommunicatorTest, OperationsWithDeadPeerFailWithinTimeout) {
  const std::vector<RankExit> exits = RunForkedRanks(
      2, kTestDeadline,
      [](int rank, TcpRendezvous& rendezvous) -> absl::Status {
        ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                         Connect(rank, 2, rendezvous, {{"both", {0, 1}}}));
        RETURN_IF_ERROR(comm->Barrier(kOpTimeout));
        if (rank == 1) ::_exit(0);  // dies without closing anything
        absl::SleepFor(absl::Milliseconds(200));
        const absl::Time start = absl::Now();
        at::Tensor buffer = at::empty({8}, at::kFloat);
        // Gloo may already know the peer is gone when the receive is posted.
        absl::StatusOr<std::unique_ptr<PendingOp>> receive =
            comm->Recv(buffer, 1, 3);
        const absl::Status received =
            receive.ok() ? (*receive)->Wait(kShortTimeout) : receive.status();
        if (received.ok() ||
            !absl::StrContains(received.message(), "recv from rank 1")) {
          return absl::InternalError(
              absl::StrCat("receive from a dead peer: ", received.ToString()));
        }
        if (absl::Now() - start > 2 * kShortTimeout) {
          return absl::InternalError("the receive failed too late");
        }
        std::fprintf(stderr, "rank 0 got, as expected: %s\n",
                     received.ToString().c_str());
        // The gradient group is a separate Gloo context: it must fail too.
        absl::StatusOr<std::unique_ptr<PendingOp>> sum =
            comm->AllReduceSum(buffer, "both");
        const absl::Status summed =
            sum.ok() ? (*sum)->Wait(kShortTimeout) : sum.status();
        if (summed.ok() ||
            !absl::StrContains(summed.message(), "allreduce in group 'both'")) {
          return absl::InternalError(
              absl::StrCat("allreduce with a dead peer: ", summed.ToString()));
        }
        if (absl::Now() - start > 4 * kShortTimeout) {
          return absl::InternalError("the allreduce failed too late");
        }
        std::fprintf(stderr, "rank 0 got, as expected: %s\n",
                     summed.ToString().c_str());
        return absl::OkStatus();
      });
  ExpectAllRanksSucceeded(exits);
}

// Rank 1 never creates its communicator: rank 0's creation fails within its
// timeout with an error naming the group.
TEST(GlooCommunicatorTest, JoiningFailsWhenARankNeverArrives) {
  ExpectAllRanksSucceeded(RunForkedRanks(
      2, kTestDeadline,
      [](int rank, TcpRendezvous& rendezvous) -> absl::Status {
        if (rank == 1) {
          absl::SleepFor(3 * kShortTimeout);
          return absl::OkStatus();
        }
        const auto comm = Connect(rank, 2, rendezvous, {}, kShortTimeout);
        if (comm.ok() ||
            comm.status().code() != absl::StatusCode::kUnavailable ||
            !absl::StrContains(comm.status().message(),
                               "could not join process group")) {
          return absl::InternalError(absl::StrCat("joining without rank 1: ",
                                                  comm.status().ToString()));
        }
        return absl::OkStatus();
      }));
}

TEST(GlooCommunicatorTest, RejectsBadPeerTagAndTensor) {
  ExpectAllRanksSucceeded(RunForkedRanks(
      2, kTestDeadline,
      [](int rank, TcpRendezvous& rendezvous) -> absl::Status {
        ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                         Connect(rank, 2, rendezvous));
        const at::Tensor tensor = at::zeros({2, 2}, at::kFloat);
        for (const auto& [peer, tag, argument] :
             {std::tuple<int, int64_t, at::Tensor>{rank, 0, tensor},
              {2, 0, tensor},
              {1 - rank, -1, tensor},
              {1 - rank, 0, tensor.t()}}) {
          const auto op = comm->Send(argument, peer, tag);
          if (op.status().code() != absl::StatusCode::kInvalidArgument) {
            return absl::InternalError(absl::StrCat(
                "send to ", peer, " tag ", tag, ": ", op.status().ToString()));
          }
        }
        return comm->Barrier(kOpTimeout);
      }));
}

}  // namespace
}  // namespace chimera::worker
