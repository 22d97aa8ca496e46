// DAPPLE's non-uniform stage replication in the planner: what a replicated
// stage costs, and when the search replicates one.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/analytic_profile.h"
#include "planner/plan_search.h"
#include "planner/stage_partition.h"
#include "tests/unit/planner/test_jobs.h"

namespace chimera::planner {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::HeavyFirstHalf;
using testing::LargeJob;
using testing::TestCluster;

SearchResult MustSearch(const chimera::v1::TrainJob& job,
                        const chimera::v1::Cluster& cluster,
                        const chimera::v1::ModelProfile& profile) {
  SearchOptions options;
  options.top_k = 1000;
  absl::StatusOr<SearchResult> result =
      SearchPlans(job, cluster, profile, options);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : SearchResult{};
}

TEST(ReplicationSearchTest,
     AReplicatedStageTakesBlocksInProportionToItsWorkers) {
  const auto job = LargeJob(12, 32, 3);
  const auto cluster = TestCluster(1, 3);
  const auto profile =
      AnalyticProfile(job.spec().model(), cluster.spec().device());
  const auto first_stage_blocks = [&](std::vector<int> replication) {
    return BalancedPartition(profile, 2, 4, 8, replication)[0].num_blocks;
  };
  const int straight = first_stage_blocks({});
  EXPECT_GT(first_stage_blocks({2, 1}), straight);
  EXPECT_LT(first_stage_blocks({1, 2}), straight);
  EXPECT_GT(first_stage_blocks({3, 1}), first_stage_blocks({2, 1}));
}

// DAPPLE's case for replication: the first half of the model costs twice
// the second. On three devices across a 10 Gbit/s network (DAPPLE's config
// C), the first half on two of them and the second on one gives each the
// same work and allreduces only the first half's light weights; data
// parallelism allreduces the whole model, sharded or not, and two blocks
// make no three-stage pipeline. (At 25 Gbit/s sharded data parallelism
// wins; with more blocks a looping or zero-bubble pipeline balances such a
// model with no allreduce at all; docs/planner.md says where each wins.)
TEST(ReplicationSearchTest, AHeavyFirstHalfIsReplicatedTwoToOne) {
  auto job = LargeJob(2, 48, 3);
  // A small vocabulary: the blocks are the model's cost.
  job.mutable_spec()->mutable_model()->set_vocab_size(1024);
  const auto cluster = TestCluster(3, 1, /*inter_bandwidth=*/1.25e9);
  const auto profile = HeavyFirstHalf(job, cluster);
  const SearchResult result = MustSearch(job, cluster, profile);
  ASSERT_FALSE(result.ranked.empty());
  const chimera::v1::Plan& best = result.ranked[0].plan;
  EXPECT_EQ(best.replication(), "2:1") << DescribePlan(best);
  EXPECT_THAT(DescribePlan(best), HasSubstr("1f1b W=1 D=2"));
  EXPECT_THAT(DescribePlan(best), HasSubstr("replication=2:1"));
  // It beats every plan without a replicated stage, and the reverse 1:2.
  bool straight_seen = false;
  for (const Evaluation& e : result.ranked) {
    if (e.plan.replication() == "2:1") continue;
    straight_seen |= e.plan.replication().empty();
    EXPECT_GT(best.prediction().samples_per_second(),
              e.plan.prediction().samples_per_second())
        << DescribePlan(e.plan);
  }
  EXPECT_TRUE(straight_seen);
  // The replicated stage holds the heavy block.
  ASSERT_EQ(best.partition_size(), 2);
  EXPECT_EQ(best.partition(0).num_layers(), 1);
}

TEST(ReplicationSearchTest, AJobsReplicationIsKept) {
  auto job = LargeJob(8, 48, 4);
  auto* parallelism = job.mutable_spec()->mutable_parallelism();
  parallelism->set_replication("1:3");
  const auto cluster = TestCluster(1, 4);
  const auto profile =
      AnalyticProfile(job.spec().model(), cluster.spec().device());
  const SearchResult result = MustSearch(job, cluster, profile);
  ASSERT_FALSE(result.ranked.empty());
  for (const Evaluation& e : result.ranked) {
    EXPECT_EQ(e.plan.replication(), "1:3") << DescribePlan(e.plan);
    EXPECT_EQ(e.plan.depth(), 2);
    EXPECT_EQ(e.plan.placement_size(), 4);
    // Micro-batches split into three slices.
    EXPECT_EQ(e.plan.micro_batch_size() % 3, 0) << DescribePlan(e.plan);
  }
}

}  // namespace
}  // namespace chimera::planner
