// Shared-memory collectives and a group's collectives thread across real
// processes on one host: exact sums that every member holds bit for bit,
// reduce-scatters and all-gathers of uneven shards among them, a group that
// agrees to use TCP when one member cannot share memory, and a member that
// stalls or a group torn down mid-rendezvous ending in a clear error within
// its bound.
#include "worker/comm/shared_memory_collectives.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "tests/integration/worker/comm_checks.h"
#include "worker/comm/group_collectives.h"
#include "worker/comm/tcp_rendezvous.h"
#include "worker/harness/forked_ranks.h"

namespace chimera::worker {
namespace {

using harness::RunForkedRanks;
using testing::ExpectAllRanksSucceeded;
using testing::ExpectFilledWith;

constexpr absl::Duration kTestDeadline = absl::Seconds(60);
constexpr absl::Duration kOpTimeout = absl::Seconds(20);
constexpr absl::Duration kShortTimeout = absl::Seconds(1);

// Member `rank`'s addend of sum `round`: random, so that the order of the
// additions shows in the bits.
at::Tensor Addend(int rank, int round, int64_t numel, at::ScalarType dtype) {
  at::manual_seed(1000 * round + rank);
  return at::randn({numel}, at::TensorOptions().dtype(dtype));
}

// The rank-order sum of the addends of `members` members.
at::Tensor SumOfAddends(int members, int round, int64_t numel,
                        at::ScalarType dtype) {
  at::Tensor sum = Addend(0, round, numel, dtype);
  for (int rank = 1; rank < members; ++rank) {
    sum = sum + Addend(rank, round, numel, dtype);
  }
  return sum;
}

// Three members with segments of kNumel doubles: shards of 333, 334 and 334.
constexpr int kMembers = 3;
constexpr int64_t kNumel = 1001;

absl::StatusOr<std::unique_ptr<SharedMemoryCollectives>> JoinThree(
    int rank, TcpRendezvous& rendezvous) {
  return SharedMemoryCollectives::Join(rendezvous.store(), "test", rank,
                                       kMembers, kNumel * sizeof(double),
                                       SharedMemoryOptions{});
}

absl::Status ExpectStatus(const absl::Status& status, absl::StatusCode code,
                          absl::string_view text, absl::string_view what) {
  if (status.code() != code || !absl::StrContains(status.message(), text)) {
    return absl::InternalError(
        absl::StrCat(what, ": expected ", absl::StatusCodeToString(code),
                     " with '", text, "', got ", status.ToString()));
  }
  return absl::OkStatus();
}

// RunForkedRanks, where rank 0, which hosts the store, waits for the other
// ranks to finish before its process ends and takes the store with it.
std::vector<harness::RankExit> RunRanks(int size,
                                        const harness::RankBody& body) {
  return RunForkedRanks(
      size, kTestDeadline,
      [&](int rank, TcpRendezvous& rendezvous) -> absl::Status {
        const absl::Status result = body(rank, rendezvous);
        const auto store = rendezvous.store();
        try {
          store->set(absl::StrCat("finished/", rank), {1});
          for (int other = 1; rank == 0 && other < size; ++other) {
            store->wait({absl::StrCat("finished/", other)},
                        absl::ToChronoMilliseconds(kTestDeadline));
          }
        } catch (const std::exception& e) {
          return absl::InternalError(e.what());
        }
        return result;
      });
}

// Three members (so slices are uneven), float and double, five rounds
// through the same segments: each result is the rank-order sum of the
// addends, bit for bit, on every member.
TEST(SharedMemoryCollectivesTest, SumsAreExactAndTheSameOnEveryMember) {
  ExpectAllRanksSucceeded(RunRanks(
      kMembers, [](int rank, TcpRendezvous& rendezvous) -> absl::Status {
        ASSIGN_OR_RETURN(auto group, JoinThree(rank, rendezvous));
        for (int round = 0; round < 5; ++round) {
          const at::ScalarType dtype = round % 2 ? at::kDouble : at::kFloat;
          at::Tensor tensor = Addend(rank, round, kNumel, dtype);
          RETURN_IF_ERROR(group->Sum(tensor, kOpTimeout));
          if (!at::equal(tensor,
                         SumOfAddends(kMembers, round, kNumel, dtype))) {
            return absl::InternalError(
                absl::StrCat("round ", round, ": not the rank-order sum"));
          }
        }
        at::Tensor empty = at::empty({0}, at::kFloat);
        RETURN_IF_ERROR(group->Sum(empty, kOpTimeout));
        return ExpectStatus(
            group->Sum(at::zeros({kNumel + 1}, at::kDouble), kOpTimeout),
            absl::StatusCode::kInvalidArgument, "at most 8008 bytes",
            "a tensor larger than the segments");
      }));
}

// Three members (uneven shards), float and double, a reduce-scatter, an
// all-gather and a sum in turn through the same segments: each member's shard
// of the reduce-scatter is the rank-order sum, bit for bit what Sum gives,
// and the all-gather puts every member's shard in place.
TEST(SharedMemoryCollectivesTest, ShardedCollectivesInterleaveWithSums) {
  ExpectAllRanksSucceeded(RunRanks(
      kMembers, [](int rank, TcpRendezvous& rendezvous) -> absl::Status {
        ASSIGN_OR_RETURN(auto group, JoinThree(rank, rendezvous));
        const ShardRange own = ShardOf(kNumel, rank, kMembers);
        for (int round = 0; round < 4; ++round) {
          const at::ScalarType dtype = round % 2 ? at::kDouble : at::kFloat;
          const at::Tensor expected =
              SumOfAddends(kMembers, round, kNumel, dtype);
          at::Tensor scattered = Addend(rank, round, kNumel, dtype);
          RETURN_IF_ERROR(group->ReduceScatterSum(scattered, kOpTimeout));
          if (!at::equal(scattered.narrow(0, own.begin, own.size()),
                         expected.narrow(0, own.begin, own.size()))) {
            return absl::InternalError(absl::StrCat(
                "round ", round, ": the own shard is not the rank-order sum"));
          }
          // Only the own shard is right; the rest must be gathered.
          scattered.narrow(0, 0, own.begin).fill_(-1);
          scattered.narrow(0, own.end, kNumel - own.end).fill_(-1);
          RETURN_IF_ERROR(group->AllGather(scattered, kOpTimeout));
          if (!at::equal(scattered, expected)) {
            return absl::InternalError(absl::StrCat(
                "round ", round, ": the gathered shards are not the sum"));
          }
          at::Tensor summed = Addend(rank, round, kNumel, dtype);
          RETURN_IF_ERROR(group->Sum(summed, kOpTimeout));
          if (!at::equal(summed, expected)) {
            return absl::InternalError(
                absl::StrCat("round ", round, ": the sum after them differs"));
          }
        }
        return ExpectStatus(
            group->AllGather(at::zeros({kNumel + 1}, at::kDouble), kOpTimeout),
            absl::StatusCode::kInvalidArgument, "shared-memory all-gather",
            "a tensor larger than the segments");
      }));
}

// Member 1 declines: both are told so, the same verdict on each.
TEST(SharedMemoryCollectivesTest, AMemberThatDeclinesTurnsTheGroupAway) {
  ExpectAllRanksSucceeded(
      RunRanks(2, [](int rank, TcpRendezvous& rendezvous) -> absl::Status {
        SharedMemoryOptions options;
        options.enabled = rank == 0;
        const auto group = SharedMemoryCollectives::Join(
            rendezvous.store(), "test", rank, 2, 64, options);
        return ExpectStatus(group.status(),
                            absl::StatusCode::kFailedPrecondition,
                            "member 1 does not use shared memory",
                            "joining beside a member that declines");
      }));
}

// Member 1 joins but never sums: member 0's sum ends within its timeout,
// naming it.
TEST(SharedMemoryCollectivesTest, AStalledMemberEndsTheSumInTimeNamingIt) {
  ExpectAllRanksSucceeded(
      RunRanks(2, [](int rank, TcpRendezvous& rendezvous) -> absl::Status {
        ASSIGN_OR_RETURN(auto group, SharedMemoryCollectives::Join(
                                         rendezvous.store(), "test", rank, 2,
                                         64, SharedMemoryOptions{}));
        if (rank == 1) {
          absl::SleepFor(3 * kShortTimeout);
          return absl::OkStatus();
        }
        const absl::Time start = absl::Now();
        const absl::Status status =
            group->Sum(at::ones({16}, at::kFloat), kShortTimeout);
        RETURN_IF_ERROR(ExpectStatus(status,
                                     absl::StatusCode::kDeadlineExceeded,
                                     "member 1", "summing without member 1"));
        if (absl::Now() - start > 2 * kShortTimeout) {
          return absl::InternalError("the sum failed too late");
        }
        return absl::OkStatus();
      }));
}

GroupCollectivesOptions GroupOptions(TcpRendezvous& rendezvous, int rank,
                                     int size) {
  GroupCollectivesOptions options;
  options.store = rendezvous.store();
  options.key_prefix = "test";
  options.rank = rank;
  options.size = size;
  options.timeout = kOpTimeout;
  options.group = "test";
  return options;
}

// Stands in for Gloo: counts its calls and does nothing.
GroupCollectives::Run CountingTcp(std::shared_ptr<int> calls) {
  return [calls](Collective, const at::Tensor&) {
    ++*calls;
    return absl::OkStatus();
  };
}

// On one host the group sums through shared memory and grows its segments
// for a larger tensor; with a member that declines, every member takes TCP.
TEST(GroupCollectivesTest,
     SharesMemoryOnOneHostAndTakesTcpWhenAMemberDeclines) {
  for (const bool member_declines : {false, true}) {
    SCOPED_TRACE(member_declines ? "member 1 declines" : "all share");
    ExpectAllRanksSucceeded(
        RunRanks(2, [&](int rank, TcpRendezvous& rendezvous) -> absl::Status {
          GroupCollectivesOptions options = GroupOptions(rendezvous, rank, 2);
          options.shared_memory = !(member_declines && rank == 1);
          auto tcp_calls = std::make_shared<int>(0);
          GroupCollectives group(options, CountingTcp(tcp_calls));
          const at::Tensor small = at::full({10}, rank + 1.0, at::kFloat);
          const at::Tensor large = at::full({5000}, rank + 1.0, at::kFloat);
          std::unique_ptr<PendingOp> first =
              group.Start(Collective::kSum, small);
          std::unique_ptr<PendingOp> second =
              group.Start(Collective::kSum, large);
          RETURN_IF_ERROR(first->Wait(kOpTimeout));
          RETURN_IF_ERROR(second->Wait(kOpTimeout));
          if (member_declines) {
            if (*tcp_calls != 2 || group.uses_shared_memory()) {
              return absl::InternalError(absl::StrCat(
                  "expected both sums over TCP, got ", *tcp_calls));
            }
            return absl::OkStatus();
          }
          if (*tcp_calls != 0 || !group.uses_shared_memory()) {
            return absl::InternalError("expected shared memory, got TCP");
          }
          RETURN_IF_ERROR(ExpectFilledWith(small, 3.0, "the small sum"));
          return ExpectFilledWith(large, 3.0, "the sum that grew the segments");
        }));
  }
}

// Member 1 never starts its allreduce: tearing member 0's group down ends
// the rendezvous it is blocked in at once, and its pending sum says so.
TEST(GroupCollectivesTest, TearingDownEndsABlockedSumAtOnce) {
  ExpectAllRanksSucceeded(
      RunRanks(2, [](int rank, TcpRendezvous& rendezvous) -> absl::Status {
        if (rank == 1) {
          absl::SleepFor(3 * kShortTimeout);
          return absl::OkStatus();
        }
        auto group = std::make_unique<GroupCollectives>(
            GroupOptions(rendezvous, rank, 2),
            CountingTcp(std::make_shared<int>(0)));
        std::unique_ptr<PendingOp> sum =
            group->Start(Collective::kSum, at::ones({16}, at::kFloat));
        RETURN_IF_ERROR(ExpectStatus(sum->Wait(absl::Milliseconds(300)),
                                     absl::StatusCode::kDeadlineExceeded,
                                     "allreduce in group 'test' did not finish",
                                     "waiting on a sum member 1 never joins"));
        const absl::Time start = absl::Now();
        group.reset();
        if (absl::Now() - start > kShortTimeout) {
          return absl::InternalError(absl::StrCat(
              "tearing down took ", absl::FormatDuration(absl::Now() - start)));
        }
        return ExpectStatus(sum->Wait(kShortTimeout),
                            absl::StatusCode::kCancelled, "cancelled",
                            "the sum of a group torn down");
      }));
}

}  // namespace
}  // namespace chimera::worker
