// The layout of optimizer-state sharding: shards of a flat buffer, where
// they cut the tensors laid out in it, and parameters moved into one (the
// gather across processes is tested in
// tests/integration/worker/sharded_optimizer_test.cc).
#include "worker/runtime/sharded_optimizer.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

namespace chimera::worker {
namespace {

TEST(ShardOfTest, ShardsAreContiguousCoverEveryElementOnceAndEvenWithinOne) {
  for (const int64_t elements : {0, 1, 7, 22, 1000}) {
    for (const int members : {1, 2, 3, 4, 8}) {
      int64_t next = 0;
      for (int member = 0; member < members; ++member) {
        const ShardRange shard = ShardOf(elements, member, members);
        EXPECT_EQ(shard.begin, next) << elements << " in " << members;
        EXPECT_GE(shard.size(), elements / members);
        EXPECT_LE(shard.size(), elements / members + 1);
        next = shard.end;
      }
      EXPECT_EQ(next, elements) << elements << " in " << members;
    }
  }
}

TEST(ShardOfTest, TheLayoutIsTheDocumentedOne) {
  // [i·n/G, (i+1)·n/G): 22 elements in 4 shards of 5, 6, 5 and 6.
  EXPECT_EQ(ShardOf(22, 0, 4).end, 5);
  EXPECT_EQ(ShardOf(22, 1, 4).end, 11);
  EXPECT_EQ(ShardOf(22, 2, 4).end, 16);
  EXPECT_EQ(ShardOf(22, 3, 4).end, 22);
}

TEST(PiecesOfShardTest, AShardIsCutWhereTheTensorsOfTheLayoutMeet) {
  // Tensors of 3, 0, 4 and 2 elements: flat [0, 3), [3, 7), [7, 9).
  const std::vector<int64_t> numels = {3, 0, 4, 2};
  const std::vector<ShardPiece> pieces = PiecesOfShard(numels, {2, 8});
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].tensor, 0u);
  EXPECT_EQ(pieces[0].offset, 2);
  EXPECT_EQ(pieces[0].in_shard, 0);
  EXPECT_EQ(pieces[0].size, 1);
  EXPECT_EQ(pieces[1].tensor, 2u);
  EXPECT_EQ(pieces[1].offset, 0);
  EXPECT_EQ(pieces[1].in_shard, 1);
  EXPECT_EQ(pieces[1].size, 4);
  EXPECT_EQ(pieces[2].tensor, 3u);
  EXPECT_EQ(pieces[2].offset, 0);
  EXPECT_EQ(pieces[2].in_shard, 5);
  EXPECT_EQ(pieces[2].size, 1);
  EXPECT_TRUE(PiecesOfShard(numels, {4, 4}).empty());
  // Every member's pieces together cover every tensor once.
  for (const int members : {1, 2, 3, 5, 9, 12}) {
    std::vector<int64_t> covered(numels.size(), 0);
    for (int member = 0; member < members; ++member) {
      for (const ShardPiece& piece :
           PiecesOfShard(numels, ShardOf(9, member, members))) {
        EXPECT_EQ(piece.offset, covered[piece.tensor]) << members;
        covered[piece.tensor] += piece.size;
      }
    }
    EXPECT_EQ(covered, numels) << members;
  }
}

TEST(FlattenParametersTest, ParametersKeepTheirValuesAndBecomeViewsInOrder) {
  at::Tensor weight =
      at::arange(6, at::kDouble).view({2, 3}).requires_grad_(true);
  at::Tensor bias = at::arange(10, 14, at::kDouble).requires_grad_(true);
  const std::vector<at::Tensor> parameters = {weight, bias};
  const at::Tensor expected_weight = weight.detach().clone();
  const at::Tensor expected_bias = bias.detach().clone();

  const at::Tensor flat = FlattenParameters(parameters);

  ASSERT_EQ(flat.numel(), 10);
  EXPECT_TRUE(at::equal(weight, expected_weight));
  EXPECT_TRUE(at::equal(bias, expected_bias));
  EXPECT_EQ(weight.sizes(), (std::vector<int64_t>{2, 3}));
  // Writing the buffer writes the parameters: they live in it, in order.
  flat.fill_(-1);
  EXPECT_TRUE(at::equal(weight, at::full({2, 3}, -1.0, at::kDouble)));
  EXPECT_TRUE(at::equal(bias, at::full({4}, -1.0, at::kDouble)));
}

TEST(FlattenParametersTest, AutogradStillAccumulatesIntoTheParameters) {
  at::Tensor weight = at::ones({2, 2}, at::kDouble).requires_grad_(true);
  FlattenParameters({weight});

  (weight * 3).sum().backward();

  ASSERT_TRUE(weight.grad().defined());
  EXPECT_TRUE(at::equal(weight.grad(), at::full({2, 2}, 3.0, at::kDouble)));
  EXPECT_TRUE(weight.is_leaf());
}

}  // namespace
}  // namespace chimera::worker
