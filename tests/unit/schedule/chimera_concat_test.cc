// Chimera with more micro-batches than stages (Chimera paper section 3.5,
// Fig. 7): backward halving and forward doubling against direct
// concatenation, at forward cost 1 and backward cost 2 (recomputation adds
// a forward's cost) unless a test says otherwise.
#include <algorithm>
#include <tuple>

#include "gtest/gtest.h"
#include "tests/unit/schedule/test_util.h"

namespace chimera::schedule {
namespace {

using testing::InteriorIdle;
using testing::MustGenerate;
using testing::MustSimulate;
using testing::Params;

struct SimulatedRun {
  Schedule schedule;
  SimulationResult result;
};

SimulatedRun Generate(int d, int n, Concat concat, double backward = 2) {
  ScheduleParams params = Params(Scheme::kChimera, d, n);
  params.concat = concat;
  SimulatedRun run{MustGenerate(params), {}};
  run.result = MustSimulate(run.schedule, /*forward=*/1, backward);
  return run;
}

int MaxPeak(const SimulationResult& r) {
  int peak = 0;
  for (const WorkerResult& w : r.workers) peak = std::max(peak, w.peak_activations);
  return peak;
}

// (D, N / D) with N in {2D, 4D}.
class ChimeraConcatTest
    : public ::testing::TestWithParam<std::tuple<int, int>> {
 protected:
  int d() const { return std::get<0>(GetParam()); }
  int n() const { return std::get<0>(GetParam()) * std::get<1>(GetParam()); }
};

TEST_P(ChimeraConcatTest, BackwardHalvingSplitsEveryBackwardInTwoHalves) {
  SimulatedRun halving = Generate(d(), n(), Concat::kBackwardHalving);
  for (const WorkerProgram& w : halving.schedule.workers) {
    for (const Instruction& inst : w.instructions) {
      if (inst.op == OpKind::kForward) {
        EXPECT_EQ(inst.micro_batches.size(), 1u);
      }
      if (inst.op != OpKind::kBackward) continue;
      EXPECT_EQ(inst.num_parts, 2);
      EXPECT_FALSE(inst.recompute);
    }
  }
}

TEST_P(ChimeraConcatTest, BackwardHalvingBubbleRatioIsBelowDirectConcatenation) {
  SimulatedRun direct = Generate(d(), n(), Concat::kDirect);
  SimulatedRun halving = Generate(d(), n(), Concat::kBackwardHalving);
  EXPECT_LT(halving.result.bubble_ratio, direct.result.bubble_ratio);
  EXPECT_LE(halving.result.makespan, direct.result.makespan);
}

// Halves of a backward cost as much as a forward, so the basic units
// concatenate like Chimera's forward = backward case: every worker idles only
// in its D/2-1 start and D/2-1 end slots of one forward each, whatever N is.
TEST_P(ChimeraConcatTest, BackwardHalvingIdlesOnlyInTheStartAndEndBubbles) {
  SimulatedRun halving = Generate(d(), n(), Concat::kBackwardHalving);
  for (const WorkerResult& w : halving.result.workers) {
    EXPECT_NEAR(w.idle, d() - 2.0, 1e-9) << "rank " << w.rank;
  }
  EXPECT_NEAR(halving.result.makespan, 3.0 * n() + d() - 2, 1e-9);
}

TEST_P(ChimeraConcatTest, ForwardDoublingRunsPairsForwardAndRecomputesSingles) {
  SimulatedRun doubling = Generate(d(), n(), Concat::kForwardDoubling);
  for (const WorkerProgram& w : doubling.schedule.workers) {
    int forwards = 0, backwards = 0;
    for (const Instruction& inst : w.instructions) {
      if (inst.op == OpKind::kForward) {
        ++forwards;
        EXPECT_EQ(inst.micro_batches.size(), 2u);
      } else if (inst.op == OpKind::kBackward) {
        ++backwards;
        EXPECT_EQ(inst.micro_batches.size(), 1u);
        EXPECT_EQ(inst.num_parts, 1);
        EXPECT_TRUE(inst.recompute);
      }
    }
    // Each worker holds one stage of each replica: all N micro-batches.
    EXPECT_EQ(forwards, n() / 2);
    EXPECT_EQ(backwards, n());
  }
}

// The paper treats a doubled forward and a recomputing backward as equal
// work. Where they are (forward = backward = 1: both cost 2) no worker idles
// between its first and last op except in the first unit's start bubbles,
// and that idle does not grow with N: no intermediate bubbles.
TEST_P(ChimeraConcatTest, ForwardDoublingHasNoIntermediateBubblesAtEqualWork) {
  SimulatedRun doubling = Generate(d(), n(), Concat::kForwardDoubling, /*backward=*/1);
  SimulatedRun basic = Generate(d(), 2 * d(), Concat::kForwardDoubling, /*backward=*/1);
  for (int rank = 0; rank < d(); ++rank) {
    EXPECT_NEAR(doubling.result.workers[rank].idle, 2.0 * (d() - 2), 1e-9)
        << "rank " << rank;
    EXPECT_NEAR(InteriorIdle(doubling.schedule, doubling.result, rank),
                InteriorIdle(basic.schedule, basic.result, rank), 1e-9)
        << "rank " << rank;
  }
}

// At backward = 2x forward a doubled forward (2) is shorter than a
// recomputing backward (3), so some intermediate idle remains: each further
// D micro-batches add (D-2)/2 idle per worker, half of direct
// concatenation's D-2, and the bubble ratio stays below direct's.
TEST_P(ChimeraConcatTest, ForwardDoublingHalvesDirectConcatenationsBubbleGrowth) {
  SimulatedRun direct = Generate(d(), n(), Concat::kDirect);
  SimulatedRun doubling = Generate(d(), n(), Concat::kForwardDoubling);
  SimulatedRun direct_base = Generate(d(), 2 * d(), Concat::kDirect);
  SimulatedRun doubling_base = Generate(d(), 2 * d(), Concat::kForwardDoubling);
  EXPECT_LT(doubling.result.bubble_ratio, direct.result.bubble_ratio);
  const int extra_units = n() / d() - 2;
  for (int rank = 0; rank < d(); ++rank) {
    EXPECT_NEAR(direct.result.workers[rank].idle -
                    direct_base.result.workers[rank].idle,
                extra_units * (d() - 2.0), 1e-9);
    EXPECT_NEAR(doubling.result.workers[rank].idle -
                    doubling_base.result.workers[rank].idle,
                extra_units * (d() - 2.0) / 2, 1e-9);
  }
}

// "Forward doubling ... leads to two times activation memory consumption":
// a doubled forward stashes two micro-batches, so the peak is 2D (MixPipe
// section III-C: 2D * M_a), twice direct concatenation's D.
TEST_P(ChimeraConcatTest, ForwardDoublingPeakActivationsAreTwiceDirect) {
  SimulatedRun direct = Generate(d(), n(), Concat::kDirect);
  SimulatedRun doubling = Generate(d(), n(), Concat::kForwardDoubling);
  EXPECT_EQ(MaxPeak(direct.result), d());
  EXPECT_EQ(MaxPeak(doubling.result), 2 * d());
}

INSTANTIATE_TEST_SUITE_P(DepthsAndMultiples, ChimeraConcatTest,
                         ::testing::Combine(::testing::Values(4, 8),
                                            ::testing::Values(2, 4)));

// N = 3D with forward doubling: one doubled unit of 2D micro-batches, then
// the residual D as a direct unit (section 3.5, odd K).
TEST(ChimeraConcatTest, ForwardDoublingRunsAnOddResidualUnitDirectly) {
  SimulatedRun doubling = Generate(4, 12, Concat::kForwardDoubling);
  int pairs = 0, singles = 0;
  for (const Instruction& inst : doubling.schedule.workers[0].instructions) {
    if (inst.op != OpKind::kForward) continue;
    (inst.micro_batches.size() == 2 ? pairs : singles) += 1;
  }
  EXPECT_EQ(pairs, 4);
  EXPECT_EQ(singles, 4);
}

TEST(ChimeraConcatTest, EqualizedUnitsConcatenateWithMorePipelines) {
  for (auto [d, pipelines] : {std::pair{8, 4}, {12, 6}, {12, 4}}) {
    for (Concat concat : {Concat::kForwardDoubling, Concat::kBackwardHalving}) {
      ScheduleParams params = Params(Scheme::kChimera, d, 4 * d);
      params.pipelines = pipelines;
      params.concat = concat;
      MustGenerate(params);
    }
  }
}

}  // namespace
}  // namespace chimera::schedule
