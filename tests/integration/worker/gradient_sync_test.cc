// A stage's gradient allreduce across real processes on loopback: the whole
// bucket is summed, except a row-sparse gradient (a token embedding's), of
// which only the rows some rank used are summed.
#include "worker/runtime/gradient_sync.h"

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
constexpr int kRanks = 3;  // more than two: the ring's order is exercised
constexpr int kVocab = 6;
constexpr int kHidden = 2;

// Rank r's gradients: a [3] bias, a [6, 2] embedding and a [4] weight, each
// a slice of one bucket, in that order; the embedding's row i holds
// 10 i + r + 1 where r used row i, and -1 where nobody should read it.
struct RankGradients {
  at::Tensor bias, embedding, weight, bucket, used_rows;
};

// Rank 0 uses rows {0, 2}, rank 1 {2, 3}, rank 2 {0}: rows 1, 4 and 5 are
// used by no rank.
bool Uses(int rank, int row) {
  static const bool kUses[kRanks][kVocab] = {{true, false, true, false},
                                             {false, false, true, true},
                                             {true, false, false, false}};
  return kUses[rank][row];
}

RankGradients GradientsOf(int rank) {
  RankGradients g;
  g.bias = at::zeros({3}, at::kDouble).requires_grad_(true);
  g.embedding = at::zeros({kVocab, kHidden}, at::kDouble).requires_grad_(true);
  g.weight = at::zeros({4}, at::kDouble).requires_grad_(true);
  g.bucket = BucketGradients({g.bias, g.embedding, g.weight});
  g.bias.mutable_grad().fill_(rank + 1);
  g.weight.mutable_grad().fill_(10 * (rank + 1));
  g.used_rows = NoRowsUsed(g.embedding);
  std::vector<int64_t> used;
  for (int row = 0; row < kVocab; ++row) {
    const double value = Uses(rank, row) ? 10 * row + rank + 1 : -1;
    g.embedding.mutable_grad()[row].fill_(value);
    if (Uses(rank, row)) used.push_back(row);
  }
  MarkUsedRows(g.used_rows, at::tensor(used, at::kLong).view({1, -1}));
  return g;
}

TEST(GradientSyncTest, ARowSparseGradientIsSummedOverTheRowsSomeRankUsed) {
  ExpectAllRanksSucceeded(RunForkedRanks(
      kRanks, kTestDeadline,
      [](int rank, TcpRendezvous& rendezvous) -> absl::Status {
        GlooOptions options;
        options.rank = rank;
        options.world_size = kRanks;
        options.groups = {{GradientGroupName(0), {0, 1, 2}}};
        options.timeout = kOpTimeout;
        ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                         CreateGlooCommunicator(rendezvous, options));
        RankGradients g = GradientsOf(rank);
        ASSIGN_OR_RETURN(
            auto sync,
            GradientAllReduce::Start(
                *comm, GradientGroupName(0), g.bucket,
                RowSparseGradient{g.embedding.grad(), g.used_rows}));
        RETURN_IF_ERROR(sync->Finish(kOpTimeout));

        RETURN_IF_ERROR(ExpectFilledWith(g.bias.grad(), 1 + 2 + 3, "bias"));
        RETURN_IF_ERROR(
            ExpectFilledWith(g.weight.grad(), 10 + 20 + 30, "weight"));
        for (int row = 0; row < kVocab; ++row) {
          double sum = 0;
          bool used = false;
          for (int r = 0; r < kRanks; ++r) {
            used |= Uses(r, row);
            sum += Uses(r, row) ? 10 * row + r + 1 : -1;
          }
          // A row nobody used is left alone: this rank's own -1.
          RETURN_IF_ERROR(
              ExpectFilledWith(g.embedding.grad()[row], used ? sum : -1,
                               absl::StrCat("embedding row ", row)));
        }
        return absl::OkStatus();
      }));
}

}  // namespace
}  // namespace chimera::worker
