// Synchronous schedules with their steps back to back: a step starts on a
// worker as soon as that worker's program and its inputs allow, so the
// steady step is the one-step makespan less whatever the next step's start
// hides of this one's end.
#include <algorithm>
#include <vector>

#include "gtest/gtest.h"
#include "schedule/step_unrolling.h"
#include "tests/unit/schedule/test_util.h"

namespace chimera::schedule {
namespace {

using testing::MustGenerate;
using testing::Params;

// A head-heavy model on D stages: the last stage computes four times what
// the others do.
CostModel HeadHeavyCosts(int depth) {
  CostModel costs;
  costs.stage_forward.assign(depth, 1.0);
  costs.stage_backward.assign(depth, 2.0);
  costs.stage_backward_input.assign(depth, 1.0);
  costs.stage_backward_weight.assign(depth, 1.0);
  costs.stage_forward.back() = 4.0;
  costs.stage_backward.back() = 8.0;
  costs.stage_backward_input.back() = 4.0;
  costs.stage_backward_weight.back() = 4.0;
  costs.optimizer_step = 0.5;
  return costs;
}

TEST(SteadyStepTest, StepsInARowNumberTheirMicroBatchesOnward) {
  const Schedule s = MustGenerate(Params(Scheme::kOneFOneB, 2, 3));
  absl::StatusOr<Schedule> run = UnrollSteps(s, 2);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->topology.micro_batches, 6);
  EXPECT_EQ(run->topology.steps, 2);
  for (size_t rank = 0; rank < s.workers.size(); ++rank) {
    const std::vector<Instruction>& one = s.workers[rank].instructions;
    const std::vector<Instruction>& two = run->workers[rank].instructions;
    ASSERT_EQ(two.size(), 2 * one.size()) << "rank " << rank;
    for (size_t i = 0; i < one.size(); ++i) {
      EXPECT_EQ(two[i].micro_batches, one[i].micro_batches);
      MicroBatches onward = one[i].micro_batches;
      for (int& mb : onward) mb += 3;
      EXPECT_EQ(two[one.size() + i].micro_batches, onward);
    }
  }
}

// GPipe and 1F1B end every step with the first stage's last backward, which
// the next step's first forward waits for: back to back changes nothing.
// ZB-H1 leaves the heavy last stage's weight gradients to the step's end,
// and the next step's forwards fill the pipeline behind them.
TEST(SteadyStepTest, OnlyAStepsEndThatTheNextStartDoesNotWaitForOverlaps) {
  const CostModel costs = HeadHeavyCosts(4);
  for (Scheme scheme : {Scheme::kGpipe, Scheme::kOneFOneB}) {
    const Schedule s = MustGenerate(Params(scheme, 4, 4));
    absl::StatusOr<SteadyStep> steady = SimulateSteadyStep(s, costs);
    ASSERT_TRUE(steady.ok()) << steady.status();
    EXPECT_NEAR(steady->seconds, Simulate(s, costs)->makespan, 1e-9)
        << SchemeName(scheme);
  }
  const Schedule zb = MustGenerate(Params(Scheme::kZbH1, 4, 4));
  absl::StatusOr<SteadyStep> steady = SimulateSteadyStep(zb, costs);
  ASSERT_TRUE(steady.ok()) << steady.status();
  EXPECT_LT(steady->seconds, Simulate(zb, costs)->makespan - 1.0);
}

// Whatever overlaps, a step cannot be shorter than the busiest worker's
// compute, nor longer than one step alone.
TEST(SteadyStepTest, ASteadyStepLiesBetweenTheBusiestWorkAndOneStepAlone) {
  for (Scheme scheme : {Scheme::kGpipe, Scheme::kOneFOneB, Scheme::kZbH1,
                        Scheme::kZbH2, Scheme::kChimera}) {
    const Schedule s = MustGenerate(Params(scheme, 4, 4));
    const CostModel costs = HeadHeavyCosts(4);
    absl::StatusOr<SimulationResult> alone = Simulate(s, costs);
    absl::StatusOr<SteadyStep> steady = SimulateSteadyStep(s, costs);
    ASSERT_TRUE(alone.ok()) << alone.status();
    ASSERT_TRUE(steady.ok()) << steady.status();
    double busiest = 0;
    for (const WorkerResult& worker : alone->workers) {
      busiest = std::max(busiest, worker.busy);
    }
    EXPECT_GE(steady->seconds, busiest - 1e-9) << SchemeName(scheme);
    EXPECT_LE(steady->seconds, alone->makespan + 1e-9) << SchemeName(scheme);
  }
}

}  // namespace
}  // namespace chimera::schedule
