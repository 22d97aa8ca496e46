// The split-backward schedules reproduce their published bubbles and memory
// at unit costs (forward = B = W = 1), as `chimera schedule --scheme S
// --forward-cost 1 --backward-input-cost 1 --backward-weight-cost 1` shows
// them, for p in {4, 8, 16} and m in {p, 2p, 3p}; with fewer micro-batches
// than stages they still run.
#include <algorithm>
#include <tuple>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/schedule/test_util.h"

namespace chimera::schedule {
namespace {

using testing::MustGenerate;
using testing::Params;

SimulationResult SimulateHalves(const Schedule& schedule, double forward,
                                double input, double weight) {
  CostModel costs;
  costs.forward = forward;
  costs.backward = input + weight;
  costs.backward_input = input;
  costs.backward_weight = weight;
  absl::StatusOr<SimulationResult> result = Simulate(schedule, costs);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : SimulationResult();
}

SimulationResult SimulateUnitHalves(const Schedule& schedule) {
  return SimulateHalves(schedule, 1, 1, 1);
}

ScheduleParams AutoParams(int p, int m, int activation_limit) {
  ScheduleParams params = Params(Scheme::kZbAuto, p, m);
  params.activation_limit = activation_limit;
  return params;
}

int PeakActivations(const SimulationResult& result) {
  int peak = 0;
  for (const WorkerResult& w : result.workers) {
    peak = std::max(peak, w.peak_activations);
  }
  return peak;
}

class ZeroBubbleTest : public ::testing::TestWithParam<std::tuple<int, int>> {
 protected:
  int p() const { return std::get<0>(GetParam()); }
  int m() const { return std::get<0>(GetParam()) * std::get<1>(GetParam()); }
};

// One third of 1F1B's bubble time, (p-1)(F+B-W) = p-1 per worker of a step
// of 3m + p - 1, with 1F1B's peak memory: p micro-batches.
TEST_P(ZeroBubbleTest, ZbH1HasAThirdOfOneFOneBsBubbleAndItsPeakMemory) {
  const SimulationResult r =
      SimulateUnitHalves(MustGenerate(Params(Scheme::kZbH1, p(), m())));
  const double expected = static_cast<double>(p() - 1) / (3 * m() + p() - 1);
  for (const WorkerResult& w : r.workers) {
    EXPECT_NEAR(w.bubble_ratio, expected, 1e-9) << "rank " << w.rank;
  }
  EXPECT_NEAR(r.makespan, 3 * m() + p() - 1, 1e-9);
  EXPECT_EQ(PeakActivations(r), p());
}

// 1F1B idles 3(p-1) a worker at F = 1, backward = B + W = 2; ZB-H1 p-1.
TEST_P(ZeroBubbleTest, ZbH1IdlesAThirdOfOneFOneB) {
  const SimulationResult zb =
      SimulateUnitHalves(MustGenerate(Params(Scheme::kZbH1, p(), m())));
  const SimulationResult one_f_one_b = testing::MustSimulate(
      MustGenerate(Params(Scheme::kOneFOneB, p(), m())), 1, 2);
  for (int rank = 0; rank < p(); ++rank) {
    EXPECT_NEAR(3 * zb.workers[rank].idle, one_f_one_b.workers[rank].idle, 1e-9)
        << "rank " << rank;
  }
}

// ZB-H2 within a flushed iteration reaches the bound N(F+I+W) + (p-1)F
// that no schedule of a line beats (docs/schedules.md): at unit costs, as
// ZB-H1 does, and where I costs more than W, below ZB-H1, once m >= 2p
// gives its 2p - 1 micro-batches of memory something to hold.
TEST_P(ZeroBubbleTest, ZbH2ReachesTheFlushedBoundWithinTwoPMinusOne) {
  const SimulationResult unit =
      SimulateUnitHalves(MustGenerate(Params(Scheme::kZbH2, p(), m())));
  EXPECT_NEAR(unit.makespan, 3 * m() + p() - 1, 1e-9);
  EXPECT_LE(PeakActivations(unit), 2 * p() - 1);
  if (m() < 2 * p()) return;
  const SimulationResult h2 =
      SimulateHalves(MustGenerate(Params(Scheme::kZbH2, p(), m())), 1, 2, 1);
  const SimulationResult h1 =
      SimulateHalves(MustGenerate(Params(Scheme::kZbH1, p(), m())), 1, 2, 1);
  EXPECT_NEAR(h2.makespan, 4 * m() + p() - 1, 1e-9);
  EXPECT_LT(h2.bubble_ratio, h1.bubble_ratio);
}

// zb-auto with no limit has ZB-H2's bubble; at 1F1B's memory (p a worker)
// it has ZB-H1's, at unit costs and where I costs twice W.
TEST_P(ZeroBubbleTest, ZbAutoMatchesZbH2UnlimitedAndZbH1AtOneFOneBsMemory) {
  for (const auto& [f, i, w] : {std::tuple(1, 1, 1), std::tuple(1, 2, 1)}) {
    const SimulationResult unlimited =
        SimulateHalves(MustGenerate(AutoParams(p(), m(), 0)), f, i, w);
    const SimulationResult h2 =
        SimulateHalves(MustGenerate(Params(Scheme::kZbH2, p(), m())), f, i, w);
    EXPECT_NEAR(unlimited.bubble_ratio, h2.bubble_ratio, 1e-9) << f << i << w;
    const SimulationResult at_p =
        SimulateHalves(MustGenerate(AutoParams(p(), m(), p())), f, i, w);
    const SimulationResult h1 =
        SimulateHalves(MustGenerate(Params(Scheme::kZbH1, p(), m())), f, i, w);
    EXPECT_NEAR(at_p.bubble_ratio, h1.bubble_ratio, 1e-9) << f << i << w;
    EXPECT_LE(PeakActivations(at_p), p());
  }
}

// Whatever the limit, no worker holds more.
TEST_P(ZeroBubbleTest, ZbAutoHoldsNoMoreThanItsLimit) {
  for (int limit = 1; limit <= 2 * p(); limit += p() / 4 + 1) {
    const SimulationResult r =
        SimulateUnitHalves(MustGenerate(AutoParams(p(), m(), limit)));
    EXPECT_LE(PeakActivations(r), limit) << "limit " << limit;
  }
}

// ZB-V idles only the p - 1 slots its V takes to reach position p - 1 once
// there are at least 2p - 1 micro-batches: a step of 6m + p - 1 (each
// worker runs two chunks' F, B and W per micro-batch), the least any
// schedule of 2p stages on p workers can take, as position p - 1 can start
// nothing before the first micro-batch has crossed p - 1 stages. With fewer,
// its order (written for 2p - 1, the missing micro-batches left out) runs
// as ZB-H1 does on whole stages: the same bubble ratio.
TEST_P(ZeroBubbleTest, ZbVIdlesOnlyItsDescentOnceItHasTwoPMinusOneMicroBatches) {
  const SimulationResult v =
      SimulateUnitHalves(MustGenerate(Params(Scheme::kZbV, p(), m())));
  const SimulationResult h1 =
      SimulateUnitHalves(MustGenerate(Params(Scheme::kZbH1, p(), m())));
  if (m() >= 2 * p() - 1) {
    EXPECT_NEAR(v.makespan, 6 * m() + p() - 1, 1e-9);
    const double expected = static_cast<double>(p() - 1) / (6 * m() + p() - 1);
    for (const WorkerResult& w : v.workers) {
      EXPECT_NEAR(w.bubble_ratio, expected, 1e-9) << "rank " << w.rank;
    }
  } else {
    EXPECT_NEAR(v.bubble_ratio, h1.bubble_ratio, 1e-9);
    EXPECT_NEAR(v.makespan, 2 * h1.makespan, 1e-9);
  }
}

// Below ZB-H1 wherever it has the micro-batches to fill its V, and never
// above it.
TEST_P(ZeroBubbleTest, ZbVIsNeverAboveZbH1AndBelowFromTwoPMicroBatches) {
  const SimulationResult v =
      SimulateUnitHalves(MustGenerate(Params(Scheme::kZbV, p(), m())));
  const SimulationResult h1 =
      SimulateUnitHalves(MustGenerate(Params(Scheme::kZbH1, p(), m())));
  EXPECT_LE(v.bubble_ratio, h1.bubble_ratio + 1e-9);
  if (m() >= 2 * p()) {
    EXPECT_LT(v.bubble_ratio, h1.bubble_ratio);
  }
}

// 2p chunk micro-batches at most, each chunk half a stage: 1F1B's p stages.
TEST_P(ZeroBubbleTest, ZbVHoldsOneFOneBsPeakInHalfStages) {
  const SimulationResult r =
      SimulateUnitHalves(MustGenerate(Params(Scheme::kZbV, p(), m())));
  EXPECT_EQ(PeakActivations(r), 2 * p());
}

// DualPipeV, its overlapped F&B pairs run as F then B, reaches the V's
// bound too: every worker idles p - 1 of a step of 6m + p - 1, holding 2p + 1
// chunk micro-batches at most, the "PP + 1" of its README (PP = 2p stages).
// It needs m >= 2p, so the published m = p is refused (see the next test).
TEST_P(ZeroBubbleTest, DualPipeVIdlesOnlyItsDescentWithOneMoreMicroBatchThanZbV) {
  if (m() < 2 * p()) {
    EXPECT_FALSE(GenerateSchedule(Params(Scheme::kDualPipeV, p(), m())).ok());
    return;
  }
  const SimulationResult r =
      SimulateUnitHalves(MustGenerate(Params(Scheme::kDualPipeV, p(), m())));
  EXPECT_NEAR(r.makespan, 6 * m() + p() - 1, 1e-9);
  for (const WorkerResult& w : r.workers) {
    EXPECT_NEAR(w.idle, p() - 1, 1e-9) << "rank " << w.rank;
  }
  EXPECT_EQ(PeakActivations(r), 2 * p() + 1);
}

TEST(DualPipeVParamsTest, FewerThanTwoDMicroBatchesAreRefusedNamingTheMinimum) {
  absl::StatusOr<Schedule> s = GenerateSchedule(Params(Scheme::kDualPipeV, 4, 7));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()),
              ::testing::HasSubstr("micro-batches: 7 must be at least 2D = 8"));
}

// Chimera with the split idles only the p/2 - 1 slots before the middle
// positions' first forward (stage p/2 - 1 of a pipeline): a step of
// 3m + p/2 - 1, the least any schedule of these two pipelines can take, at
// Chimera's peak of p micro-batches.
TEST_P(ZeroBubbleTest, ChimeraZbIdlesOnlyTillTheMiddleStartsAtChimerasPeak) {
  const SimulationResult r =
      SimulateUnitHalves(MustGenerate(Params(Scheme::kChimeraZb, p(), m())));
  EXPECT_NEAR(r.makespan, 3 * m() + p() / 2 - 1, 1e-9);
  for (const WorkerResult& w : r.workers) {
    EXPECT_NEAR(w.idle, p() / 2 - 1, 1e-9) << "rank " << w.rank;
  }
  const SimulationResult chimera = testing::MustSimulate(
      MustGenerate(Params(Scheme::kChimera, p(), m())), 1, 2);
  EXPECT_EQ(PeakActivations(r), PeakActivations(chimera));
  EXPECT_EQ(PeakActivations(r), p());
}

TEST_P(ZeroBubbleTest, ChimeraZbIsBelowChimeraAndZbH1) {
  const SimulationResult zb =
      SimulateUnitHalves(MustGenerate(Params(Scheme::kChimeraZb, p(), m())));
  const SimulationResult chimera = testing::MustSimulate(
      MustGenerate(Params(Scheme::kChimera, p(), m())), 1, 2);
  const SimulationResult h1 =
      SimulateUnitHalves(MustGenerate(Params(Scheme::kZbH1, p(), m())));
  EXPECT_LT(zb.bubble_ratio, chimera.bubble_ratio);
  EXPECT_LT(zb.bubble_ratio, h1.bubble_ratio);
}

TEST(ZeroBubbleFewMicroBatchesTest, ZbH1HoldsNoMoreThanItHasMicroBatches) {
  const SimulationResult r =
      SimulateUnitHalves(MustGenerate(Params(Scheme::kZbH1, 4, 2)));
  EXPECT_EQ(PeakActivations(r), 2);
}

INSTANTIATE_TEST_SUITE_P(PublishedSizes, ZeroBubbleTest,
                         ::testing::Combine(::testing::Values(4, 8, 16),
                                            ::testing::Values(1, 2, 3)));

}  // namespace
}  // namespace chimera::schedule
