// Simulated timing of the remaining schemes and of the cost model terms.
#include <algorithm>

#include "gtest/gtest.h"
#include "tests/unit/schedule/test_util.h"

namespace chimera::schedule {
namespace {

using testing::MustGenerate;
using testing::MustSimulate;
using testing::Params;

class LoopingBubbleTest
    : public ::testing::TestWithParam<std::tuple<Scheme, int, int, int>> {};

TEST_P(LoopingBubbleTest, BubbleRatioIsDMinusOneOverNvPlusDMinusOne) {
  const auto [scheme, d, k, v] = GetParam();
  ScheduleParams params = Params(scheme, d, k * d);
  params.chunks = v;
  params.backward_slots = 1;
  SimulationResult r = MustSimulate(MustGenerate(params), 1, 1);
  const int n = k * d;
  EXPECT_NEAR(r.bubble_ratio, static_cast<double>(d - 1) / (n * v + d - 1), 1e-9);
}

INSTANTIATE_TEST_SUITE_P(
    BreadthFirst, LoopingBubbleTest,
    ::testing::Combine(::testing::Values(Scheme::kBreadthFirst),
                       ::testing::Values(2, 4, 8), ::testing::Values(1, 2, 3),
                       ::testing::Values(1, 2, 4)));

// Megatron's interleaved 1F1B: (D-1)/(N*v+D-1) for every N = kD (v = 1 is
// plain 1F1B).
class InterleavedScheduleTest
    : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(InterleavedScheduleTest, BubbleRatioMatchesFormulaForMultiplesOfDepth) {
  const auto [d, k, v] = GetParam();
  const int n = k * d;
  ScheduleParams params = Params(Scheme::kInterleaved, d, n);
  params.chunks = v;
  params.backward_slots = 1;
  SimulationResult r = MustSimulate(MustGenerate(params), 1, 1);
  EXPECT_NEAR(r.bubble_ratio, static_cast<double>(d - 1) / (n * v + d - 1),
              1e-9);
  EXPECT_NEAR(r.makespan, 2.0 * (n * v + d - 1), 1e-9);
}

INSTANTIATE_TEST_SUITE_P(DepthsMultiplesAndChunks, InterleavedScheduleTest,
                         ::testing::Combine(::testing::Values(2, 4, 8),
                                            ::testing::Values(1, 2, 3),
                                            ::testing::Values(1, 2, 3, 4)));

TEST(InterleavedScheduleTest, WarmUpFollowsMegatron) {
  // D = 4, N = 8, v = 2: position i runs (4-i-1)*2 + 4 warm-up forwards,
  // then the steady state's first forward, before its first backward;
  // micro-batches go in groups of D per chunk.
  ScheduleParams params = Params(Scheme::kInterleaved, 4, 8);
  params.chunks = 2;
  Schedule s = MustGenerate(params);
  for (int i = 0; i < 4; ++i) {
    std::vector<std::pair<int, int>> warmup;  // (chunk, micro-batch)
    for (const Instruction& inst : s.workers[i].instructions) {
      if (inst.op == OpKind::kBackward) break;
      if (inst.op == OpKind::kForward) {
        warmup.push_back({inst.chunk, inst.micro_batches[0]});
      }
    }
    ASSERT_EQ(warmup.size(), static_cast<size_t>((4 - i - 1) * 2 + 4 + 1)) << i;
    for (size_t j = 0; j < warmup.size(); ++j) {
      const int k = static_cast<int>(j);
      EXPECT_EQ(warmup[j], std::make_pair(k % 8 / 4, k / 8 * 4 + k % 4)) << j;
    }
  }
}

TEST(BreadthFirstScheduleTest, BubbleRatioHoldsWithBackwardTwiceForward) {
  ScheduleParams params = Params(Scheme::kBreadthFirst, 4, 8);
  params.chunks = 2;
  SimulationResult r = MustSimulate(MustGenerate(params));
  EXPECT_NEAR(r.bubble_ratio, 3.0 / (16 + 3), 1e-9);
}

TEST(MixPipeSimulationTest, SmallerKStashesFewerActivations) {
  ScheduleParams small = Params(Scheme::kMixPipe, 8, 8);
  small.mixpipe_k = 4;
  ScheduleParams large = small;
  large.mixpipe_k = 8;
  SimulationResult rs = MustSimulate(MustGenerate(small));
  SimulationResult rl = MustSimulate(MustGenerate(large));
  auto peak = [](const SimulationResult& r) {
    int p = 0;
    for (const WorkerResult& w : r.workers) p = std::max(p, w.peak_activations);
    return p;
  };
  EXPECT_LE(peak(rs), 4);
  EXPECT_LT(peak(rs), peak(rl));
  EXPECT_GT(rs.bubble_ratio, rl.bubble_ratio);
}

// MixPipe section III-A: makespan (D + N_bubbles) * (F + B) with
// N_bubbles = (5D - 3K - 4)/3 - Gamma, i.e. 8D - 3K - 4 - 3*Gamma at F = 1,
// B = 2, N = D. At K = D, Gamma = 0 that is Chimera's 5D - 4.
TEST(MixPipeSimulationTest, KEqualsDepthMatchesPaperFormulaAndChimera) {
  for (int d : {4, 6, 8}) {
    ScheduleParams params = Params(Scheme::kMixPipe, d, d);
    params.mixpipe_k = d;
    SimulationResult mixpipe = MustSimulate(MustGenerate(params));
    SimulationResult chimera =
        MustSimulate(MustGenerate(Params(Scheme::kChimera, d, d)));
    EXPECT_NEAR(mixpipe.makespan, 8.0 * d - 3 * d - 4, 1e-9) << "D=" << d;
    EXPECT_NEAR(mixpipe.makespan, chimera.makespan, 1e-9) << "D=" << d;
    EXPECT_NEAR(mixpipe.bubble_ratio, chimera.bubble_ratio, 1e-9) << "D=" << d;
  }
}

TEST(SimulatorTest, RecomputationAddsAForwardToEachBackward) {
  ScheduleParams params = Params(Scheme::kGpipe, 2, 2);
  params.recompute = true;
  SimulationResult r = MustSimulate(MustGenerate(params));
  // (N + D - 1) * (F + B + F).
  EXPECT_NEAR(r.makespan, 3 * 4.0, 1e-9);
}

TEST(SimulatorTest, P2pCostDelaysEveryHop) {
  Schedule s = MustGenerate(Params(Scheme::kGpipe, 4, 1));
  CostModel costs;
  costs.p2p_alpha = 0.5;
  costs.p2p_beta = 0.25;
  costs.activation_bytes = 2;  // each hop: 0.5 + 0.5 = 1
  absl::StatusOr<SimulationResult> r = Simulate(s, costs);
  ASSERT_TRUE(r.ok());
  // 4 forwards + 4 backwards + 6 hops.
  EXPECT_NEAR(r->makespan, 4 * 1 + 4 * 2 + 6 * 1.0, 1e-9);
}

TEST(SimulatorTest, RabenseifnerAllreduceCost) {
  CostModel costs;
  costs.allreduce_alpha = 1;
  costs.allreduce_beta = 0.5;
  costs.gradient_bytes = 8;
  EXPECT_NEAR(AllreduceTime(costs, 4), 2 * 2 * 1 + 2 * 3.0 / 4 * 0.5 * 8, 1e-9);
  EXPECT_EQ(AllreduceTime(costs, 1), 0);
}

TEST(SimulatorTest, RanksSharingACoreComputeOneAtATime) {
  // Two data-parallel replicas of one stage, one forward and backward each.
  ScheduleParams params = Params(Scheme::kGpipe, 1, 1);
  params.width = 2;
  const Schedule s = MustGenerate(params);
  CostModel costs;
  EXPECT_NEAR(Simulate(s, costs)->makespan, 3, 1e-9);
  costs.node_of_rank = {0, 0};
  costs.cores_per_node = 1;
  const SimulationResult shared = *Simulate(s, costs);
  EXPECT_NEAR(shared.makespan, 6, 1e-9);
  EXPECT_NEAR(shared.workers[0].busy + shared.workers[1].busy, 6, 1e-9);
  costs.cores_per_node = 2;
  EXPECT_NEAR(Simulate(s, costs)->makespan, 3, 1e-9);
}

TEST(SimulatorTest, RanksComputingAtOnceOnANodeSlowEachOtherDown) {
  // Two data-parallel replicas of one stage compute side by side.
  ScheduleParams params = Params(Scheme::kGpipe, 1, 1);
  params.width = 2;
  const Schedule s = MustGenerate(params);
  CostModel costs;
  costs.co_running_slowdown = 0.2;
  // Without nodes, or on nodes of their own, nothing changes.
  EXPECT_NEAR(Simulate(s, costs)->makespan, 3, 1e-9);
  costs.node_of_rank = {0, 1};
  EXPECT_NEAR(Simulate(s, costs)->makespan, 3, 1e-9);
  costs.node_of_rank = {0, 0};
  const SimulationResult shared = *Simulate(s, costs);
  EXPECT_NEAR(shared.makespan, 3 * 1.2, 1e-9);
  EXPECT_NEAR(shared.workers[0].busy, 3 * 1.2, 1e-9);
}

TEST(SimulatorTest, RanksTakingTurnsOnANodeRunAtFullSpeed) {
  // GPipe D=2, N=1: the two ranks never compute at the same time.
  const Schedule s = MustGenerate(Params(Scheme::kGpipe, 2, 1));
  CostModel costs;
  costs.node_of_rank = {0, 0};
  costs.co_running_slowdown = 0.5;
  EXPECT_NEAR(Simulate(s, costs)->makespan, 2 * (1 + 2), 1e-9);
}

TEST(SimulatorTest, AComputeOpAfterAWaitPaysTheWakeUpCost) {
  // GPipe D=2, N=1: rank 1 waits for its forward's input and rank 0 for its
  // backward's gradient; nothing else follows a wait.
  const Schedule s = MustGenerate(Params(Scheme::kGpipe, 2, 1));
  CostModel costs;
  costs.wake_up = 0.25;
  const SimulationResult r = *Simulate(s, costs);
  // F, F + 0.25 on rank 1, B, B + 0.25 on rank 0.
  EXPECT_NEAR(r.makespan, 1 + 1.25 + 2 + 2.25, 1e-9);
  EXPECT_NEAR(r.workers[0].busy, 1 + 2.25, 1e-9);
  EXPECT_NEAR(r.workers[1].busy, 1.25 + 2, 1e-9);
  // An op shorter than the wake-up cost at most doubles.
  costs.wake_up = 5;
  EXPECT_NEAR(Simulate(s, costs)->makespan, 1 + 2 * 1 + 2 + 2 * 2, 1e-9);
}

TEST(SimulatorTest, PostingAMessageDelaysItsSenderAndTheMessage) {
  const Schedule s = MustGenerate(Params(Scheme::kGpipe, 2, 1));
  CostModel costs;
  costs.message_post = 0.5;
  const SimulationResult r = *Simulate(s, costs);
  // F, post, F, B, post, B.
  EXPECT_NEAR(r.makespan, 1 + 0.5 + 1 + 2 + 0.5 + 2, 1e-9);
  // Posting is not compute.
  EXPECT_NEAR(r.workers[0].busy, 3, 1e-9);
}

TEST(SimulatorTest, PostingAndReceivingTakeACoreWhereRanksShareThem) {
  // GPipe D=2, N=2 on one core: 12 of compute and four posts or receives
  // of 0.5, which can only run one after another.
  const Schedule s = MustGenerate(Params(Scheme::kGpipe, 2, 2));
  for (double CostModel::*message :
       {&CostModel::message_post, &CostModel::message_receive}) {
    CostModel costs;
    costs.*message = 0.5;
    costs.node_of_rank = {0, 0};
    costs.cores_per_node = 1;
    EXPECT_NEAR(Simulate(s, costs)->makespan, 12 + 4 * 0.5, 1e-9);
  }
}

TEST(SimulatorTest, ReceivingAMessageDelaysItsReceiverOnly) {
  const Schedule s = MustGenerate(Params(Scheme::kGpipe, 2, 1));
  CostModel costs;
  costs.message_receive = 0.5;
  const SimulationResult r = *Simulate(s, costs);
  // F, receive, F, B, receive, B.
  EXPECT_NEAR(r.makespan, 1 + 0.5 + 1 + 2 + 0.5 + 2, 1e-9);
  // Receiving is not compute.
  EXPECT_NEAR(r.workers[1].busy, 3, 1e-9);
  // The sender goes on at once: rank 0's forward ends at 1, and it waits
  // for the gradient from there.
  EXPECT_NEAR(r.workers[0].timings[0].end, 1, 1e-9);
}

TEST(SimulatorTest, EveryCoRunningOpIsStretchedByTheOverlapItEndsUpWith) {
  // Chimera D=4 on one node: ops overlap partly, and stretching them moves
  // the overlaps; the result must be self-consistent.
  const Schedule s = MustGenerate(Params(Scheme::kChimera, 4, 4));
  CostModel costs;
  costs.forward = 1;
  costs.backward = 2;
  costs.node_of_rank = {0, 0, 0, 0};
  costs.co_running_slowdown = 0.1;
  const SimulationResult alone = MustSimulate(s);
  const SimulationResult r = *Simulate(s, costs);
  EXPECT_GT(r.makespan, alone.makespan);
  EXPECT_LT(r.makespan, alone.makespan * (1 + 3 * 0.1));
  for (int w = 0; w < 4; ++w) {
    const auto& program = s.workers[w].instructions;
    for (size_t i = 0; i < program.size(); ++i) {
      if (!IsCompute(program[i].op)) continue;
      const InstructionTiming& own = r.workers[w].timings[i];
      double others = 0;
      for (int q = 0; q < 4; ++q) {
        if (q == w) continue;
        for (size_t j = 0; j < s.workers[q].instructions.size(); ++j) {
          if (!IsCompute(s.workers[q].instructions[j].op)) continue;
          const InstructionTiming& other = r.workers[q].timings[j];
          others += std::max(0.0, std::min(own.end, other.end) -
                                      std::max(own.start, other.start));
        }
      }
      const double cost = program[i].op == OpKind::kForward ? 1 : 2;
      const double duration = own.end - own.start;
      EXPECT_NEAR(duration, cost * (1 + 0.1 * others / duration), 0.01)
          << "worker " << w << " instruction " << i;
    }
  }
}

TEST(SimulatorTest, AWorkersAllreducesShareItsLink) {
  // Chimera D=2: each rank holds both stages, whose allreduces (4 s each)
  // run one after the other.
  ScheduleParams params = Params(Scheme::kChimera, 2, 2);
  params.width = 2;
  params.sync = Sync::kEnd;
  const Schedule s = MustGenerate(params);
  CostModel costs;
  const double alone = Simulate(s, costs)->makespan;
  costs.stage_allreduce = {4, 4};
  EXPECT_NEAR(Simulate(s, costs)->makespan, alone + 8, 1e-9);
}

TEST(SimulatorTest, AWorkersOptimizerStepCoversEveryStageItHolds) {
  // Chimera D=4: worker w holds model stages w (down) and 3 - w (up).
  const Schedule s = MustGenerate(Params(Scheme::kChimera, 4, 4));
  CostModel costs;
  costs.optimizer_step = 0.5;
  costs.stage_optimizer = {1, 2, 4, 8};
  const SimulationResult r = *Simulate(s, costs);
  for (int w = 0; w < 4; ++w) {
    const auto& instructions = s.workers[w].instructions;
    ASSERT_EQ(instructions.back().op, OpKind::kOptimizerStep);
    const InstructionTiming& step = r.workers[w].timings.back();
    EXPECT_NEAR(step.end - step.start,
                0.5 + costs.stage_optimizer[w] + costs.stage_optimizer[3 - w], 1e-9)
        << "worker " << w;
  }
}

// Timing of `w`'s instruction of kind `op` on model stage `stage`.
InstructionTiming TimingOf(const Schedule& s, const SimulationResult& r, int w,
                           OpKind op, int stage) {
  const auto& instructions = s.workers[w].instructions;
  for (size_t i = 0; i < instructions.size(); ++i) {
    const Instruction& inst = instructions[i];
    if (inst.op == op &&
        s.topology.ModelStage({inst.chunk, inst.stage}) == stage) {
      return r.workers[w].timings[i];
    }
  }
  ADD_FAILURE() << OpName(op) << " of stage " << stage << " on worker " << w;
  return {};
}

struct ShardedRun {
  Schedule schedule;
  SimulationResult result;
};

// `scheme` at D = 2, N = 2 and `width`, sharded as gradients-and-optimizer,
// where an allreduce of a stage's gradients takes 1 (a reduce-scatter or an
// all-gather 1/2) and a stage's whole step 4.
ShardedRun SimulateSharded(Scheme scheme, int width) {
  ScheduleParams params = Params(scheme, 2, 2);
  params.width = width;
  params.sharding = Sharding::kGradientsAndOptimizer;
  ShardedRun run{MustGenerate(params), {}};
  CostModel costs;
  costs.allreduce_beta = 1;
  costs.gradient_bytes = 1;
  costs.stage_optimizer = {4, 4};
  run.result = *Simulate(run.schedule, costs);
  return run;
}

TEST(SimulatorTest, AShardedStageStepsItsShareAndWaitsForItsGather) {
  // 1F1B, W = 2: groups of two, each worker holding one stage.
  const auto [s, r] = SimulateSharded(Scheme::kOneFOneB, 2);
  for (int w = 0; w < 4; ++w) {
    const int stage = w % 2;
    const InstructionTiming step = TimingOf(s, r, w, OpKind::kShardStep, stage);
    EXPECT_NEAR(step.end - step.start, 2, 1e-9) << "worker " << w;
    const InstructionTiming& rest = r.workers[w].timings.end()[-2];
    EXPECT_NEAR(rest.end - rest.start, 0, 1e-9) << "worker " << w;
    // Nothing after the SHARD_STEP hides the gather.
    const InstructionTiming gathered =
        TimingOf(s, r, w, OpKind::kAllGatherEnd, stage);
    EXPECT_NEAR(gathered.end, step.end + 0.5, 1e-9) << "worker " << w;
  }
}

TEST(SimulatorTest, AChimeraWorkersFirstGatherHidesBehindItsSecondShardStep) {
  // Chimera: both workers hold stages 0 and 1, gathered in that order;
  // stage 0's gather (1/2) runs while stage 1's shard steps (2).
  const auto [s, r] = SimulateSharded(Scheme::kChimera, 1);
  for (int w = 0; w < 2; ++w) {
    const InstructionTiming first = TimingOf(s, r, w, OpKind::kAllGatherEnd, 0);
    EXPECT_NEAR(first.end - first.start, 0, 1e-9) << "worker " << w;
    const InstructionTiming second_step =
        TimingOf(s, r, w, OpKind::kShardStep, 1);
    const InstructionTiming second =
        TimingOf(s, r, w, OpKind::kAllGatherEnd, 1);
    EXPECT_NEAR(second.end, second_step.end + 0.5, 1e-9) << "worker " << w;
    double sums = 0;
    for (int stage = 0; stage < 2; ++stage) {
      const InstructionTiming sum =
          TimingOf(s, r, w, OpKind::kReduceScatterEnd, stage);
      sums += sum.end - sum.start;
    }
    EXPECT_NEAR(r.workers[w].exposed_allreduce, sums + 0.5, 1e-9);
  }
}

TEST(SimulatorTest, AFullyShardedWorkerHidesEveryGatherButItsFirst) {
  // Breadth-first D = 2, v = 2, W = 2, sharded full, where an all-gather
  // takes 1/2 and each compute op at least 1: every gather but the first of
  // a step begins an op ahead of its use; position 0's first has nothing to
  // run behind, position 1's runs while it waits for its first activation.
  ScheduleParams params = Params(Scheme::kBreadthFirst, 2, 2);
  params.chunks = 2;
  params.width = 2;
  params.sharding = Sharding::kFull;
  const Schedule s = MustGenerate(params);
  CostModel costs;
  costs.allreduce_beta = 1;
  costs.gradient_bytes = 1;
  const SimulationResult r = *Simulate(s, costs);
  for (int w = 0; w < 4; ++w) {
    std::vector<double> waits;
    const auto& program = s.workers[w].instructions;
    for (size_t i = 0; i < program.size(); ++i) {
      if (program[i].op != OpKind::kAllGatherEnd) continue;
      waits.push_back(r.workers[w].timings[i].end -
                      r.workers[w].timings[i].start);
    }
    ASSERT_EQ(waits.size(), 3u) << "worker " << w;
    EXPECT_NEAR(waits[0], w % 2 == 0 ? 0.5 : 0, 1e-9) << "worker " << w;
    EXPECT_NEAR(waits[1], 0, 1e-9) << "worker " << w;
    EXPECT_NEAR(waits[2], 0, 1e-9) << "worker " << w;
  }
}

TEST(SimulatorTest, EagerSyncStartsTheAllreduceInTheBubble) {
  // Rank 0's stage 3 finishes its gradients mid-iteration: eager sync
  // starts its allreduce then, end sync only after local compute.
  auto begin_time = [](Sync sync) {
    ScheduleParams params = Params(Scheme::kChimera, 4, 4);
    params.sync = sync;
    Schedule s = MustGenerate(params);
    SimulationResult r = MustSimulate(s);
    const auto& prog = s.workers[0].instructions;
    for (size_t i = 0; i < prog.size(); ++i) {
      if (prog[i].op == OpKind::kAllreduceBegin && prog[i].stage == 3) {
        return r.workers[0].timings[i].start;
      }
    }
    return -1.0;
  };
  EXPECT_LT(begin_time(Sync::kEager), begin_time(Sync::kEnd));
  EXPECT_NEAR(begin_time(Sync::kEnd), 16, 1e-9);
}

TEST(SimulatorTest, AnEagerAllreduceTakesTheLinkBeforeOneBegunLater) {
  // Chimera D=4, eager sync: rank 0 begins stage 3's allreduce in its
  // bubble and stage 0's at the end, but its program waits for stage 0's
  // first. Stage 3's runs when it began, hidden; only stage 0's is exposed.
  ScheduleParams params = Params(Scheme::kChimera, 4, 4);
  params.sync = Sync::kEager;
  const Schedule s = MustGenerate(params);
  CostModel costs;
  const double alone = Simulate(s, costs)->makespan;
  costs.stage_allreduce = {1, 1, 1, 1};
  const SimulationResult r = *Simulate(s, costs);
  EXPECT_NEAR(r.workers[0].exposed_allreduce, 1, 1e-9);
  EXPECT_NEAR(r.makespan, alone + 1, 1e-9);
}

TEST(SimulatorTest, CriticalPathAccountsForTheMakespanWithoutCommunication) {
  for (Scheme scheme : {Scheme::kGpipe, Scheme::kOneFOneB, Scheme::kChimera}) {
    SimulationResult r = MustSimulate(MustGenerate(Params(scheme, 4, 8)));
    EXPECT_NEAR(r.critical_forwards * 1.0 + r.critical_backwards * 2.0, r.makespan,
                1e-9);
  }
}

}  // namespace
}  // namespace chimera::schedule
