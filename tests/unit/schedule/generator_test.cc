// Published bubble ratios and activation counts, reproduced by generating
// each scheme and simulating it at unit costs.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/schedule/test_util.h"

namespace chimera::schedule {
namespace {

using testing::MustGenerate;
using testing::MustSimulate;
using testing::Params;

// Orders ops for forward = backward, as the papers' figures do.
ScheduleParams EqualCosts(ScheduleParams params) {
  params.backward_slots = 1;
  return params;
}

double Ratio(int numerator, int denominator) {
  return static_cast<double>(numerator) / denominator;
}

class LinearBubbleTest
    : public ::testing::TestWithParam<std::tuple<Scheme, int, int>> {};

TEST_P(LinearBubbleTest, BubbleRatioIsDMinusOneOverNPlusDMinusOne) {
  const auto [scheme, d, n] = GetParam();
  SimulationResult r = MustSimulate(MustGenerate(Params(scheme, d, n)));
  for (const WorkerResult& w : r.workers) {
    EXPECT_NEAR(w.bubble_ratio, Ratio(d - 1, n + d - 1), 1e-9) << w.rank;
  }
  EXPECT_NEAR(r.makespan, 3.0 * (n + d - 1), 1e-9);
}

INSTANTIATE_TEST_SUITE_P(
    GpipeAndOneFOneB, LinearBubbleTest,
    ::testing::Combine(::testing::Values(Scheme::kGpipe, Scheme::kOneFOneB),
                       ::testing::Values(1, 2, 4, 7, 8),
                       ::testing::Values(1, 3, 8, 16)));

TEST(OneFOneBScheduleTest, PeakActivationsRangeFromOneToD) {
  const int d = 8;
  SimulationResult r = MustSimulate(MustGenerate(Params(Scheme::kOneFOneB, d, 16)));
  for (int i = 0; i < d; ++i) {
    EXPECT_EQ(r.workers[i].peak_activations, d - i) << "stage " << i;
  }
}

TEST(OneFOneBScheduleTest, PolicyPbAdmitsTwiceAsManyWarmUpForwards) {
  ScheduleParams params = Params(Scheme::kOneFOneB, 4, 16);
  params.policy = WarmupPolicy::kPb;
  SimulationResult r = MustSimulate(MustGenerate(params));
  // K_i = min(2(D-i)-1, N): 7, 5, 3, 1.
  EXPECT_EQ(r.workers[0].peak_activations, 7);
  EXPECT_EQ(r.workers[1].peak_activations, 5);
  EXPECT_EQ(r.workers[3].peak_activations, 1);
}

TEST(GpipeScheduleTest, StashesEveryMicroBatch) {
  SimulationResult r = MustSimulate(MustGenerate(Params(Scheme::kGpipe, 4, 6)));
  for (const WorkerResult& w : r.workers) EXPECT_EQ(w.peak_activations, 6);
}

class ChimeraBubbleTest : public ::testing::TestWithParam<int> {};

TEST_P(ChimeraBubbleTest, BubbleRatioMatchesPaperAtNEqualsD) {
  const int d = GetParam();
  SimulationResult r = MustSimulate(MustGenerate(EqualCosts(Params(Scheme::kChimera, d, d))),
                                    /*forward=*/1, /*backward=*/1);
  for (const WorkerResult& w : r.workers) {
    EXPECT_NEAR(w.bubble_ratio, Ratio(d - 2, 2 * d + d - 2), 1e-9) << w.rank;
  }
}

// With backward = 2x forward the merged order's critical path has D forwards
// and 2D-2 backwards (the paper's Fig. 6: C_f = 6, C_b = 10 at D = 6), and
// Chimera still beats 1F1B.
TEST_P(ChimeraBubbleTest, CriticalPathWithBackwardTwiceForwardMatchesFigure6) {
  const int d = GetParam();
  SimulationResult r = MustSimulate(MustGenerate(Params(Scheme::kChimera, d, d)));
  EXPECT_EQ(r.critical_forwards, d);
  EXPECT_EQ(r.critical_backwards, 2 * d - 2);
  EXPECT_NEAR(r.makespan, 1.0 * d + 2.0 * (2 * d - 2), 1e-9);
  EXPECT_LT(r.bubble_ratio, Ratio(d - 1, d + d - 1));
}

TEST_P(ChimeraBubbleTest, DirectConcatenationKeepsRatioForMultiplesOfD) {
  const int d = GetParam();
  for (int k : {2, 3, 4}) {
    const int n = k * d;
    SimulationResult r = MustSimulate(
        MustGenerate(EqualCosts(Params(Scheme::kChimera, d, n))), 1, 1);
    EXPECT_NEAR(r.bubble_ratio, Ratio(d - 2, 2 * n + d - 2), 1e-9) << "N=" << n;
  }
}

TEST_P(ChimeraBubbleTest, PeakActivationsBetweenHalfDPlusOneAndD) {
  const int d = GetParam();
  SimulationResult r = MustSimulate(MustGenerate(Params(Scheme::kChimera, d, d)));
  int low = d, high = 0;
  for (const WorkerResult& w : r.workers) {
    low = std::min(low, w.peak_activations);
    high = std::max(high, w.peak_activations);
  }
  EXPECT_EQ(low, d / 2 + 1);
  EXPECT_EQ(high, d);
}

INSTANTIATE_TEST_SUITE_P(Depths, ChimeraBubbleTest,
                         ::testing::Values(2, 4, 6, 8, 16));

TEST(ChimeraScheduleTest, TwoFPipelinesBubbleRatioMatchesTable3) {
  for (auto [d, pipelines] : {std::pair{8, 4}, {8, 8}, {12, 6}, {16, 4}}) {
    for (int k : {1, 2, 3}) {
      ScheduleParams params = EqualCosts(Params(Scheme::kChimera, d, k * d));
      params.pipelines = pipelines;
      SimulationResult r = MustSimulate(MustGenerate(params), 1, 1);
      const int n = k * d;
      EXPECT_NEAR(r.bubble_ratio,
                  Ratio(d - pipelines, pipelines * n + d - pipelines), 1e-9)
          << "D=" << d << " 2f=" << pipelines << " N=" << n;
    }
  }
}

TEST(ChimeraScheduleTest, FewerMicroBatchesThanStagesSplitEvenly) {
  for (int n = 1; n < 8; ++n) {
    Schedule s = MustGenerate(Params(Scheme::kChimera, 8, n));
    int down = 0, up = 0;
    for (const Instruction& inst : s.workers[0].instructions) {
      if (inst.op != OpKind::kForward) continue;
      (inst.chunk == 0 ? down : up) += 1;
    }
    EXPECT_EQ(down, (n + 1) / 2) << "N=" << n;
    EXPECT_EQ(up, n / 2) << "N=" << n;
  }
}

TEST(ChimeraScheduleTest, StageMappingFollowsSection36) {
  ScheduleParams params = Params(Scheme::kChimera, 8, 8);
  params.pipelines = 4;
  Schedule s = MustGenerate(params);
  // Down pipeline 1 (chunk 2) maps stages 0..7 to workers 4,5,6,7,0,1,2,3;
  // its up pipeline (chunk 3) in reverse.
  for (int stage = 0; stage < 8; ++stage) {
    const int down = (stage + 4) % 8;
    const auto& held_down = s.workers[down].stages;
    EXPECT_NE(std::find(held_down.begin(), held_down.end(), StageRef{2, stage}),
              held_down.end());
    const auto& held_up = s.workers[7 - down].stages;
    EXPECT_NE(std::find(held_up.begin(), held_up.end(), StageRef{3, stage}),
              held_up.end());
  }
}

TEST(ChimeraScheduleTest, EagerSyncOnlyWhereABubbleFollows) {
  Schedule s = MustGenerate(Params(Scheme::kChimera, 4, 4));
  // P0 launches stage 3's allreduce right after its last backward (a bubble
  // follows); P1 holds stage 2 with no bubble after it and waits until the
  // end (Chimera paper Fig. 4b).
  auto begins_before_local_compute_ends = [&](int rank, int stage) {
    const auto& prog = s.workers[rank].instructions;
    size_t begin = prog.size(), last_compute = 0;
    for (size_t i = 0; i < prog.size(); ++i) {
      if (prog[i].op == OpKind::kAllreduceBegin && prog[i].stage == stage) begin = i;
      if (IsCompute(prog[i].op)) last_compute = i;
    }
    return begin < last_compute;
  };
  EXPECT_TRUE(begins_before_local_compute_ends(0, 3));
  EXPECT_FALSE(begins_before_local_compute_ends(1, 2));
  EXPECT_FALSE(begins_before_local_compute_ends(0, 0));
}

// Where each op of `w` sits that sums, steps or gathers model stage `stage`
// (absent: not found).
std::map<OpKind, size_t> SyncOpsOf(const Schedule& s, const WorkerProgram& w,
                                   int stage) {
  std::map<OpKind, size_t> at;
  for (size_t i = 0; i < w.instructions.size(); ++i) {
    const Instruction& inst = w.instructions[i];
    const bool of_stage =
        s.topology.ModelStage({inst.chunk, inst.stage}) == stage;
    if (ActsOnWholeStage(inst.op) && of_stage) {
      at[inst.op] = i;
    } else if (inst.op == OpKind::kOptimizerStep) {
      at[inst.op] = i;
    }
  }
  return at;
}

TEST(ShardedScheduleTest, EachStageSumsStepsItsShardAndGathersInOrder) {
  for (const Sharding sharding :
       {Sharding::kOptimizer, Sharding::kGradientsAndOptimizer}) {
    ScheduleParams params = Params(Scheme::kOneFOneB, 2, 4);
    params.width = 2;
    params.sharding = sharding;
    const Schedule s = MustGenerate(params);
    const bool scatter = sharding == Sharding::kGradientsAndOptimizer;
    const OpKind begin =
        scatter ? OpKind::kReduceScatterBegin : OpKind::kAllreduceBegin;
    const OpKind end =
        scatter ? OpKind::kReduceScatterEnd : OpKind::kAllreduceEnd;
    for (const WorkerProgram& w : s.workers) {
      const int stage = w.rank % 2;
      const std::map<OpKind, size_t> at = SyncOpsOf(s, w, stage);
      ASSERT_EQ(at.size(), 6u)
          << "rank " << w.rank << " " << ShardingName(sharding);
      EXPECT_LT(at.at(begin), at.at(end));
      EXPECT_EQ(at.at(OpKind::kShardStep), at.at(end) + 1);
      EXPECT_EQ(at.at(OpKind::kAllGatherBegin), at.at(end) + 2);
      EXPECT_LT(at.at(OpKind::kAllGatherBegin), at.at(OpKind::kOptimizerStep));
      EXPECT_EQ(at.at(OpKind::kAllGatherEnd), w.instructions.size() - 1);
    }
  }
}

// Where `w` computes its first and its last weight gradient of model stage
// `stage`.
std::pair<size_t, size_t> WeightGradientsOf(const Schedule& s,
                                            const WorkerProgram& w, int stage) {
  std::pair<size_t, size_t> span{w.instructions.size(), 0};
  for (size_t i = 0; i < w.instructions.size(); ++i) {
    const Instruction& inst = w.instructions[i];
    if (ComputesWeightGradient(inst.op) &&
        s.topology.ModelStage({inst.chunk, inst.stage}) == stage) {
      span.first = std::min(span.first, i);
      span.second = i;
    }
  }
  return span;
}

TEST(ShardedScheduleTest, ABreadthFirstWorkerEndsAScatteredSumBeforeItsNext) {
  // D = 2, two chunks, W = 2: position 0 holds model stages 0 and 2, whose
  // backward passes follow each other (stage 2's first).
  ScheduleParams params = Params(Scheme::kBreadthFirst, 2, 4);
  params.chunks = 2;
  params.width = 2;
  params.sharding = Sharding::kGradientsAndOptimizer;
  const Schedule s = MustGenerate(params);
  for (const WorkerProgram& w : s.workers) {
    const int earlier = w.rank % 2, later = earlier + 2;
    const std::map<OpKind, size_t> at = SyncOpsOf(s, w, later);
    const auto [first, last] = WeightGradientsOf(s, w, earlier);
    const size_t later_last = WeightGradientsOf(s, w, later).second;
    // Right after its last weight gradient and the send of its input's.
    EXPECT_GT(at.at(OpKind::kReduceScatterBegin), later_last);
    EXPECT_LE(at.at(OpKind::kReduceScatterBegin), later_last + 2)
        << "rank " << w.rank;
    EXPECT_LT(at.at(OpKind::kReduceScatterEnd), first) << "rank " << w.rank;
    EXPECT_EQ(at.at(OpKind::kShardStep), at.at(OpKind::kReduceScatterEnd) + 1);
    EXPECT_EQ(at.at(OpKind::kAllGatherBegin),
              at.at(OpKind::kReduceScatterEnd) + 2);
    EXPECT_GT(SyncOpsOf(s, w, earlier).at(OpKind::kReduceScatterEnd), last)
        << "the last stage to finish ends its sum after it";
  }
}

TEST(ShardedScheduleTest, SumsEndAfterEveryComputeWhereNothingIsGainedOrAsked) {
  // An allreduced stage keeps its gradients whole anyway; Chimera's groups
  // span both directions; and sync=end puts every collective at the end.
  ScheduleParams optimizer = Params(Scheme::kBreadthFirst, 2, 4);
  optimizer.chunks = 2;
  optimizer.width = 2;
  optimizer.sharding = Sharding::kOptimizer;
  ScheduleParams at_end = optimizer;
  at_end.sharding = Sharding::kGradientsAndOptimizer;
  at_end.sync = Sync::kEnd;
  ScheduleParams chimera = Params(Scheme::kChimera, 4, 4);
  chimera.sharding = Sharding::kGradientsAndOptimizer;
  for (const ScheduleParams& params : {optimizer, at_end, chimera}) {
    const Schedule s = MustGenerate(params);
    for (const WorkerProgram& w : s.workers) {
      size_t last_compute = 0, first_end = w.instructions.size();
      for (size_t i = 0; i < w.instructions.size(); ++i) {
        const OpKind op = w.instructions[i].op;
        if (IsCompute(op)) last_compute = i;
        if (EndsCollective(op)) first_end = std::min(first_end, i);
      }
      EXPECT_GT(first_end, last_compute)
          << SchemeName(params.scheme) << " " << ShardingName(params.sharding)
          << " rank " << w.rank;
    }
  }
}

TEST(ShardedScheduleTest, AChimeraWorkerGathersOneStageWhileItStepsTheOther) {
  // Chimera D = 2: both workers hold model stages 0 and 1.
  ScheduleParams params = Params(Scheme::kChimera, 2, 2);
  params.sharding = Sharding::kGradientsAndOptimizer;
  const Schedule s = MustGenerate(params);
  for (const WorkerProgram& w : s.workers) {
    const std::map<OpKind, size_t> first = SyncOpsOf(s, w, 0);
    const std::map<OpKind, size_t> second = SyncOpsOf(s, w, 1);
    EXPECT_LT(first.at(OpKind::kAllGatherBegin), second.at(OpKind::kShardStep));
    EXPECT_LT(second.at(OpKind::kShardStep), first.at(OpKind::kAllGatherEnd));
    EXPECT_LT(second.at(OpKind::kReduceScatterBegin),
              first.at(OpKind::kReduceScatterEnd));
  }
}

// Fully sharded schedules at W = 2 (groups of two mirrored positions), and
// Chimera W = 1 (groups spanning both directions).
std::vector<ScheduleParams> FullyShardedParams() {
  std::vector<ScheduleParams> all;
  for (const auto& [scheme, chunks] :
       {std::pair{Scheme::kOneFOneB, 1}, std::pair{Scheme::kInterleaved, 2},
        std::pair{Scheme::kBreadthFirst, 2}}) {
    ScheduleParams params = Params(scheme, 2, 4);
    params.chunks = chunks;
    params.width = 2;
    params.sharding = Sharding::kFull;
    all.push_back(params);
  }
  ScheduleParams chimera = Params(Scheme::kChimera, 4, 4);
  chimera.sharding = Sharding::kFull;
  all.push_back(chimera);
  return all;
}

// Per instruction of `w`, the model stages whose whole parameters it holds
// or is gathering then (from an ALLGATHER_BEGIN to its RELEASE_PARAMS).
std::vector<std::set<int>> WholeStagesHeld(const Schedule& s,
                                           const WorkerProgram& w) {
  std::vector<std::set<int>> held;
  std::set<int> now;
  for (const Instruction& inst : w.instructions) {
    const int stage = s.topology.ModelStage({inst.chunk, inst.stage});
    if (inst.op == OpKind::kAllGatherBegin) now.insert(stage);
    held.push_back(now);
    if (inst.op == OpKind::kReleaseParams) now.erase(stage);
  }
  return held;
}

TEST(FullyShardedScheduleTest, EveryComputeRunsOnGatheredParameters) {
  for (const ScheduleParams& params : FullyShardedParams()) {
    const Schedule s = MustGenerate(params);
    for (const WorkerProgram& w : s.workers) {
      std::map<int, bool> gathered;  // by model stage: ended, not released
      int shard_steps = 0;
      for (const Instruction& inst : w.instructions) {
        const int stage = s.topology.ModelStage({inst.chunk, inst.stage});
        if (inst.op == OpKind::kAllGatherEnd) gathered[stage] = true;
        if (inst.op == OpKind::kReleaseParams) gathered[stage] = false;
        if (IsCompute(inst.op)) {
          EXPECT_TRUE(gathered[stage])
              << SchemeName(params.scheme) << " rank " << w.rank << " "
              << DescribeInstruction(inst);
        }
        if (inst.op == OpKind::kShardStep) {
          ++shard_steps;
          EXPECT_FALSE(gathered[stage]) << "a stale copy outlives the update";
        }
      }
      EXPECT_EQ(shard_steps, static_cast<int>(w.stages.size()));
      for (const auto& [stage, whole] : gathered) {
        EXPECT_FALSE(whole) << SchemeName(params.scheme) << " rank " << w.rank
                            << " keeps stage " << stage << " after the step";
      }
    }
  }
}

TEST(FullyShardedScheduleTest, LoopingWorkersGatherPerRunOfOneStageAndHoldTwo) {
  // A looping worker releases a stage exactly where its compute moves to
  // another stage (breadth-first: once per loop; interleaved: per
  // micro-batch group), and holds at most the stage it computes and the
  // next one whole.
  for (const ScheduleParams& params : FullyShardedParams()) {
    if (!IsLooping(params.scheme)) continue;
    const Schedule s = MustGenerate(params);
    for (const WorkerProgram& w : s.workers) {
      const std::vector<std::set<int>> held = WholeStagesHeld(s, w);
      std::optional<size_t> last_compute;
      for (size_t i = 0; i < w.instructions.size(); ++i) {
        EXPECT_LE(held[i].size(), 2u) << "rank " << w.rank << " #" << i;
        const Instruction& inst = w.instructions[i];
        if (!IsCompute(inst.op)) continue;
        if (last_compute) {
          const Instruction& prev = w.instructions[*last_compute];
          const int prev_stage =
              s.topology.ModelStage({prev.chunk, prev.stage});
          bool released = false;
          for (size_t j = *last_compute + 1; j < i; ++j) {
            released = released ||
                       (w.instructions[j].op == OpKind::kReleaseParams &&
                        s.topology.ModelStage({w.instructions[j].chunk,
                                               w.instructions[j].stage}) ==
                            prev_stage);
          }
          const bool moves =
              s.topology.ModelStage({inst.chunk, inst.stage}) != prev_stage;
          EXPECT_EQ(released, moves)
              << SchemeName(params.scheme) << " rank " << w.rank << " #" << i;
        }
        last_compute = i;
      }
    }
  }
}

TEST(FullyShardedScheduleTest, ABreadthFirstWorkerGathersEachStageOncePerLoop) {
  // D = 2, v = 2: position p runs chunk 0's forwards, chunk 1's forwards and
  // backwards, then chunk 0's backwards: three gathers, one of chunk 1.
  const Schedule s = MustGenerate(FullyShardedParams()[2]);
  for (const WorkerProgram& w : s.workers) {
    std::map<int, int> gathers;  // by chunk
    for (const Instruction& inst : w.instructions) {
      if (inst.op == OpKind::kAllGatherBegin) ++gathers[inst.chunk];
    }
    EXPECT_EQ(gathers, (std::map<int, int>{{0, 2}, {1, 1}}))
        << "rank " << w.rank;
  }
}

TEST(FullyShardedScheduleTest, GroupsAcrossDirectionsGatherOncePerStepAtTheStart) {
  // Chimera: the two members of a group hold the stage in opposite
  // directions and run it at different times; each gathers it once, begun
  // before any compute so that neither waits on the other's progress.
  const Schedule s = MustGenerate(FullyShardedParams()[3]);
  for (const WorkerProgram& w : s.workers) {
    size_t first_compute = w.instructions.size();
    int begins = 0;
    for (size_t i = 0; i < w.instructions.size(); ++i) {
      const OpKind op = w.instructions[i].op;
      if (IsCompute(op)) first_compute = std::min(first_compute, i);
      if (op == OpKind::kAllGatherBegin) {
        ++begins;
        EXPECT_LT(i, first_compute) << "rank " << w.rank;
      }
    }
    EXPECT_EQ(begins, 2) << "rank " << w.rank;
  }
}

}  // namespace
}  // namespace chimera::schedule
