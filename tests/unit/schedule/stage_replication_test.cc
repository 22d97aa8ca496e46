// DAPPLE's non-uniform stage replication: the rank layout, the programs
// each replica runs on its slices, what the validator refuses and what the
// simulator predicts.
#include "schedule/stage_replication.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "schedule/csv_io.h"
#include "tests/unit/schedule/test_util.h"

namespace chimera::schedule {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::MustGenerate;
using testing::Params;

ScheduleParams Replicated(Scheme scheme, std::vector<int> replication,
                          int micro_batches, int width = 1) {
  ScheduleParams params =
      Params(scheme, static_cast<int>(replication.size()), micro_batches);
  params.replication = std::move(replication);
  params.width = width;
  return params;
}

// The micro-batches `rank` runs `op` on, in program order.
std::vector<int> MicroBatchesOf(const Schedule& s, int rank, OpKind op) {
  std::vector<int> mbs;
  for (const Instruction& inst : s.workers[rank].instructions) {
    if (inst.op == op) mbs.push_back(inst.micro_batches[0]);
  }
  return mbs;
}

// The peers of `rank`'s `op`s, in program order.
std::vector<int> PeersOf(const Schedule& s, int rank, OpKind op) {
  std::vector<int> peers;
  for (const Instruction& inst : s.workers[rank].instructions) {
    if (inst.op == op) peers.push_back(inst.peer);
  }
  return peers;
}

TEST(StageReplicationTest, RanksRunPositionByPositionReplicaByReplica) {
  Topology t;
  t.depth = 3;
  t.width = 2;
  t.replication = {2, 1, 3};
  EXPECT_EQ(t.WorkersPerPipeline(), 6);
  EXPECT_EQ(t.NumWorkers(), 12);
  EXPECT_EQ(t.SlicesPerMicroBatch(), 6);
  EXPECT_EQ(t.RankOf(1, 2, 1), 6 + 2 + 1 + 1);
  EXPECT_EQ(t.PositionOf(10), 2);
  EXPECT_EQ(t.ReplicaIndexOf(10), 1);
  EXPECT_EQ(DpRank(t, 10), 1);
  // Six slices: stage 0's replicas own three each, stage 2's two each.
  EXPECT_EQ(t.SliceOwner(0, 2), 0);
  EXPECT_EQ(t.SliceOwner(0, 3), 1);
  EXPECT_EQ(t.SliceOwner(2, 6 + 3), 1);
  EXPECT_EQ(t.SliceOwner(1, 5), 0);
}

TEST(StageReplicationTest, TwoToOneSplitsEachMicroBatchAndGathersItsSlices) {
  const Schedule s =
      MustGenerate(Replicated(Scheme::kOneFOneB, {2, 1}, /*micro_batches=*/3));
  ASSERT_EQ(s.workers.size(), 3u);
  EXPECT_EQ(s.topology.micro_batches, 6);
  // Each replica of stage 0 runs its half of every micro-batch...
  EXPECT_THAT(MicroBatchesOf(s, 0, OpKind::kForward), ElementsAre(0, 2, 4));
  EXPECT_THAT(MicroBatchesOf(s, 1, OpKind::kForward), ElementsAre(1, 3, 5));
  EXPECT_THAT(PeersOf(s, 1, OpKind::kSendAct), ElementsAre(2, 2, 2));
  // ...and stage 1 both halves, back to back, receiving each from its
  // replica and returning each gradient to it.
  EXPECT_THAT(MicroBatchesOf(s, 2, OpKind::kForward),
              ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_THAT(PeersOf(s, 2, OpKind::kRecvAct), ElementsAre(0, 1, 0, 1, 0, 1));
  EXPECT_THAT(PeersOf(s, 2, OpKind::kSendGrad), ElementsAre(0, 1, 0, 1, 0, 1));
  // Stage 0's gradient group is its two replicas.
  for (int rank : {0, 1}) {
    EXPECT_THAT(PeersOf(s, rank, OpKind::kAllreduceBegin), ElementsAre(-1));
  }
  EXPECT_THAT(PeersOf(s, 2, OpKind::kAllreduceBegin), ElementsAre());
}

TEST(StageReplicationTest, OneToTwoSendsEachSliceToItsReplica) {
  const Schedule s = MustGenerate(Replicated(Scheme::kGpipe, {1, 2}, 2));
  EXPECT_THAT(PeersOf(s, 0, OpKind::kSendAct), ElementsAre(1, 2, 1, 2));
  EXPECT_THAT(MicroBatchesOf(s, 2, OpKind::kBackward), ElementsAre(1, 3));
}

TEST(StageReplicationTest, EveryLayoutValidatesAndRoundTripsThroughCsv) {
  const std::vector<std::vector<int>> replications = {
      {1, 1}, {2, 1}, {1, 2}, {2, 1, 1}, {1, 3}, {2, 3}, {3, 2, 1}, {4, 2}};
  for (Scheme scheme : {Scheme::kGpipe, Scheme::kOneFOneB}) {
    for (const std::vector<int>& replication : replications) {
      for (int width : {1, 2}) {
        for (int micro_batches : {1, 3, 5}) {
          SCOPED_TRACE(::testing::Message()
                       << SchemeName(scheme) << " "
                       << ReplicationName(replication) << " W=" << width
                       << " N=" << micro_batches);
          const Schedule s = MustGenerate(
              Replicated(scheme, replication, micro_batches, width));
          const absl::StatusOr<Schedule> back =
              ReadScheduleCsv(WriteScheduleCsv(s));
          ASSERT_TRUE(back.ok()) << back.status();
          EXPECT_EQ(back->topology.replication, replication);
          ASSERT_EQ(back->workers.size(), s.workers.size());
          for (size_t r = 0; r < s.workers.size(); ++r) {
            EXPECT_EQ(back->workers[r].instructions, s.workers[r].instructions);
          }
        }
      }
    }
  }
}

TEST(StageReplicationTest, ReplicasOfAStageStartEachMicroBatchTogether) {
  const Schedule s = MustGenerate(Replicated(Scheme::kOneFOneB, {1, 2}, 4));
  const SimulationResult r = testing::MustSimulate(s);
  auto forward_starts = [&](int rank) {
    std::vector<double> starts;
    const auto& program = s.workers[rank].instructions;
    for (size_t i = 0; i < program.size(); ++i) {
      if (program[i].op == OpKind::kForward) {
        starts.push_back(r.workers[rank].timings[i].start);
      }
    }
    return starts;
  };
  EXPECT_EQ(forward_starts(1), forward_starts(2));
}

// DAPPLE's case for replication: a stage that costs twice the next one per
// micro-batch, run on two workers, leaves neither waiting for the other.
TEST(StageReplicationTest, ReplicatingTheHeavyStageBalancesThePipeline) {
  constexpr int kMicroBatches = 8;
  CostModel costs;
  costs.stage_forward = {2, 1};
  costs.stage_backward = {4, 2};
  const Schedule straight =
      MustGenerate(Params(Scheme::kOneFOneB, 2, kMicroBatches));
  const absl::StatusOr<SimulationResult> straight_time =
      Simulate(straight, costs);
  ASSERT_TRUE(straight_time.ok()) << straight_time.status();
  // The costs of a slice: half a micro-batch.
  CostModel sliced = costs;
  sliced.stage_forward = {1, 0.5};
  sliced.stage_backward = {2, 1};
  const Schedule two_one =
      MustGenerate(Replicated(Scheme::kOneFOneB, {2, 1}, kMicroBatches));
  const absl::StatusOr<SimulationResult> two_one_time =
      Simulate(two_one, sliced);
  ASSERT_TRUE(two_one_time.ok()) << two_one_time.status();
  // Straight: stage 0 computes N (2 + 4) and stage 1 waits half the step.
  // 2:1: every worker computes N x 3, so the step is half that plus the
  // fill and drain (a forward and a backward of stage 1's slices).
  EXPECT_GE(straight_time->makespan, kMicroBatches * 6);
  EXPECT_LE(two_one_time->makespan, kMicroBatches * 3 + 3);
  EXPECT_LT(two_one_time->makespan, 0.6 * straight_time->makespan);
}

TEST(StageReplicationTest, ParametersNameTheBadReplication) {
  auto errors = [](ScheduleParams params) {
    return DescribeScheduleParamErrors(ValidateScheduleParams(params));
  };
  ScheduleParams params = Replicated(Scheme::kOneFOneB, {2, 1}, 4);
  params.depth = 3;
  EXPECT_THAT(errors(params),
              HasSubstr("replication: 2:1 names 2 stages, but the pipeline "
                        "has 3"));
  params = Replicated(Scheme::kOneFOneB, {2, 0}, 4);
  EXPECT_THAT(errors(params), HasSubstr("every stage needs at least one "
                                        "worker, not 0"));
  params = Replicated(Scheme::kChimera, {2, 1}, 4);
  EXPECT_THAT(errors(params),
              HasSubstr("replication: applies to gpipe or 1f1b, not chimera"));
  // With every stage on one worker of one pipeline nothing can shard.
  params = Replicated(Scheme::kOneFOneB, {1, 1}, 4);
  params.sharding = Sharding::kOptimizer;
  EXPECT_THAT(errors(params),
              HasSubstr("sharding: optimizer needs gradient groups of two or "
                        "more workers"));
  EXPECT_THAT(ParseReplication("2:0").status().message(),
              HasSubstr("'0' must be a number of workers in [1, 32768]"));
  EXPECT_THAT(ParseReplication("2:x").status().message(),
              HasSubstr("'2:x' is not a replication"));
  EXPECT_THAT(ParseReplication("").status().message(),
              HasSubstr("'' must be a number of workers"));
  EXPECT_THAT(*ParseReplication("15:1"), ElementsAre(15, 1));
  EXPECT_EQ(WorkerCount(Replicated(Scheme::kGpipe, {15, 1}, 4, 2)), 32);
}

// A replicated stage shards over its replicas in every pipeline; at W = 1
// a stage on one worker keeps its whole state.
TEST(StageReplicationTest, AReplicatedStageShardsOverItsReplicas) {
  for (Sharding sharding :
       {Sharding::kOptimizer, Sharding::kGradientsAndOptimizer,
        Sharding::kFull}) {
    SCOPED_TRACE(ShardingName(sharding));
    ScheduleParams params = Replicated(Scheme::kOneFOneB, {2, 1}, 2);
    params.sharding = sharding;
    const Schedule s = MustGenerate(params);
    EXPECT_TRUE(ValidateSchedule(s).ok());
    const auto shard_steps = [&](int rank) {
      int steps = 0;
      for (const Instruction& inst : s.workers[rank].instructions) {
        steps += inst.op == OpKind::kShardStep;
      }
      return steps;
    };
    EXPECT_EQ(shard_steps(0), 1);
    EXPECT_EQ(shard_steps(1), 1);
    EXPECT_EQ(shard_steps(2), 0);
  }
}

TEST(StageReplicationTest, ValidatorRefusesASliceRunByAnotherReplica) {
  Schedule s = MustGenerate(Replicated(Scheme::kGpipe, {2, 1}, 1));
  // Rank 0 forwards slice 1, which rank 1 owns.
  for (Instruction& inst : s.workers[0].instructions) {
    if (inst.op == OpKind::kForward) inst.micro_batches = {1};
  }
  EXPECT_THAT(ValidateSchedule(s).message(),
              HasSubstr("micro-batch 1 is slice 1 of micro-batch 0, which "
                        "rank 1 runs on this stage"));
}

TEST(StageReplicationTest, ValidatorRefusesASliceSentToTheWrongReplica) {
  Schedule s = MustGenerate(Replicated(Scheme::kGpipe, {1, 2}, 1));
  for (Instruction& inst : s.workers[0].instructions) {
    if (inst.op == OpKind::kSendAct) inst.peer = 1;
  }
  EXPECT_THAT(ValidateSchedule(s).message(),
              HasSubstr("peer must be rank 2, which holds chunk 0 stage 1 for "
                        "micro-batch 1"));
}

TEST(StageReplicationTest, ValidatorRefusesSlicesThatDoNotDivide) {
  Schedule s = MustGenerate(Replicated(Scheme::kGpipe, {2, 1}, 2));
  s.topology.micro_batches = 3;
  EXPECT_THAT(ValidateSchedule(s).message(),
              HasSubstr("replication 2:1 cuts each micro-batch into 2 slices, "
                        "which must divide its 3 micro-batches"));
  s.topology.micro_batches = 4;
  s.topology.replication = {2, 1, 1};
  EXPECT_THAT(ValidateSchedule(s).message(),
              HasSubstr("replication 2:1:1 names 3 stages, but the pipeline "
                        "has 2"));
}

TEST(StageReplicationTest, OnlyOneChunkPipelinesReplicate) {
  const Schedule chimera = MustGenerate(Params(Scheme::kChimera, 2, 2));
  EXPECT_THAT(ReplicateStages(chimera, {2, 1}).status().message(),
              HasSubstr("only a synchronous one-chunk pipeline without "
                        "replication can replicate its stages"));
  const Schedule gpipe = MustGenerate(Params(Scheme::kGpipe, 2, 2));
  EXPECT_THAT(ReplicateStages(gpipe, {2}).status().message(),
              HasSubstr("replication '2' names 1 stages, but the pipeline "
                        "has 2"));
}

}  // namespace
}  // namespace chimera::schedule
