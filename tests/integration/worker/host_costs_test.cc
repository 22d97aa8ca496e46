// What a CPU worker pays on its host beyond its compute, measured in forked
// processes as `chimera-worker host-costs` measures it, with few runs: every
// figure comes back finite and in range, whatever this host's speed.
#include "worker/profile/host_costs.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chimera::worker {
namespace {

constexpr HostCostRuns kFewRuns{.runs = 5, .sleep_ms = 1};

TEST(HostCostsTest, EveryFigureIsMeasuredFiniteAndNonNegative) {
  const absl::StatusOr<chimera::v1::HostCosts> costs =
      MeasureHostCosts(kFewRuns, /*repeats=*/1);
  ASSERT_TRUE(costs.ok()) << costs.status();
  for (const double figure :
       {costs->wake_up_seconds(), costs->message_post_seconds(),
        costs->message_receive_seconds(), costs->co_running_slowdown()}) {
    EXPECT_TRUE(std::isfinite(figure) && figure >= 0) << costs->DebugString();
  }
  // A message costs its processes some CPU, and posting it some time.
  EXPECT_GT(costs->message_post_seconds(), 0) << costs->DebugString();
  EXPECT_GT(costs->message_receive_seconds(), 0) << costs->DebugString();
}

TEST(HostCostsTest, AnOpIsTimedBackToBackAndAfterASleep) {
  for (const HostLoad load : {HostLoad::kAlone, HostLoad::kLoaded}) {
    const absl::StatusOr<WakeUpTimes> times = MeasureWakeUp(64, load, kFewRuns);
    ASSERT_TRUE(times.ok()) << HostLoadName(load) << ": " << times.status();
    EXPECT_GT(times->back_to_back, 0) << HostLoadName(load);
    EXPECT_GT(times->after_sleep, 0) << HostLoadName(load);
  }
}

TEST(HostCostsTest, CoRunningIsTimedInOneProcessPerCore) {
  const absl::StatusOr<CoRunningTimes> times = MeasureCoRunning(kFewRuns);
  ASSERT_TRUE(times.ok()) << times.status();
  EXPECT_GT(times->alone, 0);
  EXPECT_GT(times->together, 0);
  EXPECT_GE(times->processes, 1);
}

TEST(HostCostsTest, TheSlowdownIsPerOtherProcessAndNeverNegative) {
  EXPECT_DOUBLE_EQ((CoRunningTimes{1.0, 1.5, 3}).Slowdown(), 0.25);
  EXPECT_DOUBLE_EQ((CoRunningTimes{1.0, 1.2, 2}).Slowdown(), 0.2);
  EXPECT_DOUBLE_EQ((CoRunningTimes{1.0, 0.9, 2}).Slowdown(), 0);
  EXPECT_DOUBLE_EQ((CoRunningTimes{1.0, 1.0, 1}).Slowdown(), 0);
}

TEST(HostCostsTest, NoRunsOrRepeatsIsRefused) {
  EXPECT_EQ(MeasureHostCosts(kFewRuns, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MeasureHostCosts({.runs = 0, .sleep_ms = 1}, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace chimera::worker
