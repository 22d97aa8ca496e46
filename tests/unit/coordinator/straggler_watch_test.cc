// A rank whose compute runs over 1.5x its peers' median (each against the
// plan's prediction for it) for 5 steps in a row straggles, until a step
// brings it back; stages the plan predicts heavier are no stragglers.
#include "coordinator/straggler_watch.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chimera::coordinator {
namespace {

// A plan of `ranks` ranks predicted at 1 s a step, each rank idle for
// `bubbles[rank]` of it.
chimera::v1::Plan PlanWithBubbles(const std::vector<double>& bubbles) {
  chimera::v1::Plan plan;
  plan.mutable_prediction()->set_iteration_seconds(1);
  for (double bubble : bubbles) {
    plan.mutable_prediction()->add_rank_bubble_ratios(bubble);
  }
  return plan;
}

CompletedStep StepWithBusy(int step, const std::vector<double>& busy) {
  CompletedStep done;
  done.step = step;
  for (size_t rank = 0; rank < busy.size(); ++rank) {
    done.ranks[static_cast<int>(rank)].set_busy_seconds(busy[rank]);
  }
  return done;
}

TEST(StragglerWatchTest,
     ARankSlowForFiveStepsInARowStragglesOnceUntilItRecovers) {
  StragglerWatch watch(PlanWithBubbles({0.2, 0.2, 0.2, 0.2}), 4);
  const std::vector<double> slow_rank_two = {0.8, 0.8, 1.7, 0.82};
  for (int step = 10; step < 14; ++step) {
    EXPECT_TRUE(watch.Observe(StepWithBusy(step, slow_rank_two)).empty())
        << "step " << step;
  }
  const std::vector<Straggler> found =
      watch.Observe(StepWithBusy(14, slow_rank_two));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].rank, 2);
  EXPECT_EQ(found[0].since_step, 10);
  EXPECT_NEAR(found[0].slowdown, 1.7 / 0.81, 1e-9);
  EXPECT_TRUE(watch.Observe(StepWithBusy(15, slow_rank_two)).empty())
      << "found once";
  EXPECT_EQ(watch.current().size(), 1u);
  watch.Observe(StepWithBusy(16, {0.8, 0.8, 0.9, 0.8}));
  EXPECT_TRUE(watch.current().empty()) << "back under the bound";
}

TEST(StragglerWatchTest, AFastStepBetweenSlowOnesStartsTheCountAgain) {
  StragglerWatch watch(PlanWithBubbles({0, 0, 0}), 3);
  for (int step = 0; step < 4; ++step) {
    watch.Observe(StepWithBusy(step, {1, 1, 2}));
  }
  watch.Observe(StepWithBusy(4, {1, 1, 1}));
  for (int step = 5; step < 9; ++step) {
    EXPECT_TRUE(watch.Observe(StepWithBusy(step, {1, 1, 2})).empty());
  }
  EXPECT_EQ(watch.Observe(StepWithBusy(9, {1, 1, 2})).size(), 1u);
}

TEST(StragglerWatchTest, AStageThePlanPredictsHeavierIsNoStraggler) {
  // Rank 1 is predicted busy 0.9 s of its step, the others 0.3 s.
  StragglerWatch watch(PlanWithBubbles({0.7, 0.1, 0.7}), 3);
  for (int step = 0; step < 10; ++step) {
    EXPECT_TRUE(watch.Observe(StepWithBusy(step, {0.3, 0.9, 0.31})).empty());
  }
  // Without a prediction, the ranks are taken to be alike.
  StragglerWatch unpredicted(chimera::v1::Plan(), 3);
  for (int step = 0; step < 5; ++step) {
    unpredicted.Observe(StepWithBusy(step, {0.3, 0.9, 0.31}));
  }
  EXPECT_EQ(unpredicted.current().size(), 1u);
}

TEST(StragglerWatchTest, ADataParallelReplicaIsJudgedByItsPipelinePosition) {
  // W = 2, D = 2: the prediction simulated ranks 0 and 1 only.
  StragglerWatch watch(PlanWithBubbles({0.5, 0.1}), 4);
  for (int step = 0; step < 5; ++step) {
    watch.Observe(StepWithBusy(step, {0.5, 0.9, 0.5, 2.0}));
  }
  ASSERT_EQ(watch.current().size(), 1u);
  EXPECT_EQ(watch.current()[0].rank, 3);
}

TEST(StragglerWatchTest, OneRankOrAnIncompleteStepJudgesNobody) {
  StragglerWatch single(PlanWithBubbles({0}), 1);
  for (int step = 0; step < 6; ++step) {
    EXPECT_TRUE(single.Observe(StepWithBusy(step, {5})).empty());
  }
  StragglerWatch pair(PlanWithBubbles({0, 0}), 2);
  for (int step = 0; step < 6; ++step) {
    EXPECT_TRUE(pair.Observe(StepWithBusy(step, {1})).empty());
  }
}

TEST(StragglerWatchTest, AStragglerIsDescribedAndRecordedWithItsWorker) {
  const Straggler straggler{2, 2.14, 12};
  EXPECT_EQ(DescribeStraggler(straggler, "w2"),
            "rank 2 on worker w2 straggles: its compute ran 2.1x its peers' "
            "median (against the plan's prediction) in each of 5 steps since "
            "step 12");
  chimera::v1::Job job;
  RecordStragglers({straggler}, {"w0", "w1", "w2"}, &job);
  ASSERT_EQ(job.status().stragglers_size(), 1);
  EXPECT_EQ(job.status().stragglers(0).worker_id(), "w2");
  EXPECT_EQ(job.status().stragglers(0).since_step(), 12);
  RecordStragglers({}, {"w0", "w1", "w2"}, &job);
  EXPECT_EQ(job.status().stragglers_size(), 0);
}

}  // namespace
}  // namespace chimera::coordinator
