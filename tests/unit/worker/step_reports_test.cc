#include "worker/daemon/step_reports.h"

#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace chimera::worker {
namespace {

constexpr absl::Duration kInterval = absl::Milliseconds(200);

chimera::v1::WorkerStepMetrics Step(int step, int checkpoint_step = 0) {
  chimera::v1::WorkerStepMetrics metrics;
  metrics.set_step(step);
  metrics.set_checkpoint_step(checkpoint_step);
  return metrics;
}

// Reports of at most `max_held` steps that sent step 1 at `sent`.
StepReports AfterAReportAt(absl::Time sent, size_t max_held = 64) {
  StepReports reports(kInterval, max_held);
  reports.Add(Step(1));
  reports.Take(sent);
  return reports;
}

std::vector<int> Steps(
    const std::vector<chimera::v1::WorkerStepMetrics>& held) {
  std::vector<int> steps;
  for (const auto& metrics : held) steps.push_back(metrics.step());
  return steps;
}

TEST(StepReportsTest, NothingHeldIsNeverDue) {
  StepReports reports(kInterval, 64);
  const absl::Time now = absl::FromUnixSeconds(1000);
  EXPECT_FALSE(reports.Due(now));
  EXPECT_EQ(reports.TimeUntilDue(now), absl::InfiniteDuration());
}

TEST(StepReportsTest, TheFirstStepAndEverySlowStepGoAtOnce) {
  StepReports reports(kInterval, 64);
  absl::Time now = absl::FromUnixSeconds(1000);
  reports.Add(Step(1));
  ASSERT_TRUE(reports.Due(now));
  EXPECT_EQ(Steps(reports.Take(now)), std::vector<int>{1});
  now += absl::Seconds(1);
  reports.Add(Step(2));
  EXPECT_TRUE(reports.Due(now));
}

TEST(StepReportsTest, FastStepsWaitForTheIntervalAndGoTogether) {
  const absl::Time sent = absl::FromUnixSeconds(1000);
  StepReports reports = AfterAReportAt(sent);
  reports.Add(Step(2));
  reports.Add(Step(3));
  const absl::Time now = sent + absl::Milliseconds(60);
  EXPECT_FALSE(reports.Due(now));
  EXPECT_EQ(reports.TimeUntilDue(now), absl::Milliseconds(140));
  EXPECT_TRUE(reports.Due(sent + kInterval));
  EXPECT_EQ(Steps(reports.Take(sent + kInterval)), (std::vector<int>{2, 3}));
  EXPECT_FALSE(reports.Due(sent + kInterval));
}

TEST(StepReportsTest, TakingNothingLeavesTheIntervalAlone) {
  const absl::Time sent = absl::FromUnixSeconds(1000);
  StepReports reports = AfterAReportAt(sent);
  EXPECT_TRUE(reports.Take(sent + absl::Milliseconds(150)).empty());
  reports.Add(Step(2));
  EXPECT_TRUE(reports.Due(sent + kInterval));
}

TEST(StepReportsTest, AFullReportGoesBeforeTheInterval) {
  const absl::Time sent = absl::FromUnixSeconds(1000);
  StepReports reports = AfterAReportAt(sent, 3);
  reports.Add(Step(2));
  reports.Add(Step(3));
  EXPECT_FALSE(reports.Due(sent));
  reports.Add(Step(4));
  EXPECT_TRUE(reports.Due(sent));
}

TEST(StepReportsTest, ANewerCheckpointGoesAtOnceAndOnlyOnce) {
  const absl::Time sent = absl::FromUnixSeconds(1000);
  StepReports reports = AfterAReportAt(sent);
  reports.Add(Step(2, /*checkpoint_step=*/2));
  ASSERT_TRUE(reports.Due(sent));
  reports.Take(sent);
  // Later steps name the same checkpoint: nothing new to tell at once.
  reports.Add(Step(3, /*checkpoint_step=*/2));
  EXPECT_FALSE(reports.Due(sent + absl::Milliseconds(1)));
}

TEST(StepReportsTest, AStepAfterWhichACheckpointIsTakenGoesAtOnce) {
  // Checkpoints every 4 steps: after steps 3, 7, ... (from 0). A restart
  // resumes from one, so the steps before it must all be reported.
  StepReports reports(kInterval, 64, /*checkpoint_every=*/4);
  const absl::Time sent = absl::FromUnixSeconds(1000);
  reports.Add(Step(0));
  reports.Take(sent);
  reports.Add(Step(1));
  reports.Add(Step(2));
  EXPECT_FALSE(reports.Due(sent));
  reports.Add(Step(3));
  ASSERT_TRUE(reports.Due(sent));
  EXPECT_EQ(Steps(reports.Take(sent)), (std::vector<int>{1, 2, 3}));
  reports.Add(Step(4));
  EXPECT_FALSE(reports.Due(sent + absl::Milliseconds(1)));
}

}  // namespace
}  // namespace chimera::worker
