#include "planner/stage_partition.h"

#include "gtest/gtest.h"
#include "planner/analytic_profile.h"
#include "schedule/generator.h"
#include "schedule/simulator.h"
#include "tests/unit/planner/test_jobs.h"

namespace chimera::planner {
namespace {

TEST(StagePartitionTest, EvenPartitionGivesTheFirstStagesTheRemainder) {
  std::vector<BlockRange> ranges = EvenPartition(10, 4);
  ASSERT_EQ(ranges.size(), 4u);
  EXPECT_EQ(ranges[0].num_blocks, 3);
  EXPECT_EQ(ranges[1].first_block, 3);
  EXPECT_EQ(ranges[3].first_block, 8);
  EXPECT_EQ(ranges[3].num_blocks, 2);
}

// With equal stages DAPPLE's latency is the 1F1B makespan (M + D - 1)(F + B),
// which is what the simulator computes for the same costs.
TEST(StagePartitionTest, LatencyOfEqualStagesMatchesTheSimulated1F1B) {
  const std::vector<StageTime> stages(4, StageTime{1.0, 2.0});
  EXPECT_DOUBLE_EQ(PipelineLatency(stages, 8), (8 + 4 - 1) * 3.0);
  schedule::ScheduleParams params;
  params.scheme = schedule::Scheme::kOneFOneB;
  params.depth = 4;
  params.micro_batches = 8;
  absl::StatusOr<schedule::Schedule> program = schedule::GenerateSchedule(params);
  ASSERT_TRUE(program.ok()) << program.status();
  absl::StatusOr<schedule::SimulationResult> simulated =
      schedule::Simulate(*program, schedule::CostModel{});
  ASSERT_TRUE(simulated.ok()) << simulated.status();
  EXPECT_DOUBLE_EQ(simulated->makespan, PipelineLatency(stages, 8));
}

TEST(StagePartitionTest, PivotMovesToTheSlowestStage) {
  // Stage 1 is three times slower: the steady phase is its, not the last's.
  const std::vector<StageTime> stages = {{1, 2}, {3, 6}, {1, 2}, {1, 2}};
  EXPECT_DOUBLE_EQ(PipelineLatency(stages, 8), (1 + 3) + 7 * 9.0 + (2 + 6));
}

TEST(StagePartitionTest, HeavyHeadLeavesTheLastStageFewerBlocks) {
  // A 30522-token vocabulary makes the head as costly as several blocks.
  chimera::v1::ModelSpec model = testing::LargeJob(16, 64, 4).spec().model();
  model.set_hidden_size(256);
  model.set_num_heads(4);
  model.set_seq_length(128);
  const chimera::v1::ModelProfile profile =
      AnalyticProfile(model, testing::TestCluster(1, 4).spec().device());
  const std::vector<BlockRange> balanced = BalancedPartition(profile, 4, 8, 16);
  ASSERT_EQ(balanced.size(), 4u);
  EXPECT_LT(balanced[3].num_blocks, 4);
  int total = 0;
  for (const BlockRange& range : balanced) total += range.num_blocks;
  EXPECT_EQ(total, 16);
  const auto latency = [&](const std::vector<BlockRange>& ranges) {
    std::vector<StageTime> times;
    for (size_t s = 0; s < ranges.size(); ++s) {
      const StageProfile stage =
          ProfileStage(profile, ranges[s], s == 0, s + 1 == ranges.size(), 8);
      times.push_back({stage.forward_seconds, stage.backward_seconds});
    }
    return PipelineLatency(times, 16);
  };
  EXPECT_LT(latency(balanced), latency(EvenPartition(16, 4)));
}

TEST(StagePartitionTest, EvenSplitIsKeptWhenLayersAreEqual) {
  chimera::v1::ModelSpec model = testing::LargeJob(8, 64, 4).spec().model();
  model.set_vocab_size(1);  // A negligible head and embedding.
  const chimera::v1::ModelProfile profile =
      AnalyticProfile(model, testing::TestCluster(1, 4).spec().device());
  const std::vector<BlockRange> balanced = BalancedPartition(profile, 4, 4, 8);
  for (const BlockRange& range : balanced) EXPECT_EQ(range.num_blocks, 2);
}

}  // namespace
}  // namespace chimera::planner
