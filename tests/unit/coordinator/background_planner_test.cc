// The planner searches on its own thread: a result is taken once, a search
// over its budget gives up saying so, a search for another key cancels the
// one under way, and destroying the planner ends a search at once.
#include "coordinator/background_planner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>

namespace chimera::coordinator {
namespace {

using ::testing::HasSubstr;

// A search that finds a plan of `depth` at once.
BackgroundPlanner::Search Finds(int depth) {
  return [depth](const std::function<bool()>&) {
    Launch launch;
    launch.plan.set_depth(depth);
    return absl::StatusOr<Launch>(launch);
  };
}

// A search that runs until it is cancelled, counting how many ended.
BackgroundPlanner::Search Endless(std::atomic<int>& cancelled_searches) {
  return [&cancelled_searches](const std::function<bool()>& cancelled) {
    while (!cancelled()) absl::SleepFor(absl::Milliseconds(1));
    ++cancelled_searches;
    return absl::StatusOr<Launch>(
        absl::CancelledError("the plan search was cancelled"));
  };
}

TEST(BackgroundPlannerTest, AResultIsTakenOnceForItsKey) {
  BackgroundPlanner planner(absl::Seconds(10));
  planner.Start("job-1", Finds(4));
  EXPECT_EQ(planner.Take("job-2", absl::ZeroDuration()), std::nullopt);
  std::optional<absl::StatusOr<Launch>> plan =
      planner.Take("job-1", absl::InfiniteDuration());
  ASSERT_TRUE(plan.has_value());
  ASSERT_TRUE(plan->ok()) << plan->status();
  EXPECT_EQ((*plan)->plan.depth(), 4);
  EXPECT_EQ(planner.Take("job-1", absl::ZeroDuration()), std::nullopt);
}

TEST(BackgroundPlannerTest, ASearchOverItsBudgetGivesUpSayingSo) {
  std::atomic<int> cancelled{0};
  BackgroundPlanner planner(absl::Milliseconds(50));
  planner.Start("job-1", Endless(cancelled));
  // Started again while it runs: still the one search.
  planner.Start("job-1", Finds(2));
  const std::optional<absl::StatusOr<Launch>> plan =
      planner.Take("job-1", absl::InfiniteDuration());
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(plan->status().message(),
              HasSubstr("planning gave up after 50ms"));
  EXPECT_THAT(plan->status().message(), HasSubstr("--planning-timeout"));
  EXPECT_EQ(cancelled, 1);
}

TEST(BackgroundPlannerTest, ASearchForAnotherKeyCancelsTheOneUnderWay) {
  std::atomic<int> cancelled{0};
  BackgroundPlanner planner(absl::Hours(1));
  planner.Start("job-1 on w0,w1", Endless(cancelled));
  // The head's workers changed: the old search ends, answering nothing, and
  // the new one begins once it has.
  planner.Start("job-1 on w0,w2", Finds(2));
  std::optional<absl::StatusOr<Launch>> plan;
  while (!plan) {
    planner.Start("job-1 on w0,w2", Finds(2));
    plan = planner.Take("job-1 on w0,w2", absl::Milliseconds(10));
  }
  ASSERT_TRUE(plan->ok()) << plan->status();
  EXPECT_EQ((*plan)->plan.depth(), 2);
  EXPECT_EQ(cancelled, 1);
  EXPECT_EQ(planner.Take("job-1 on w0,w1", absl::ZeroDuration()), std::nullopt);
}

TEST(BackgroundPlannerTest, DestroyingThePlannerEndsTheSearchUnderWay) {
  std::atomic<int> cancelled{0};
  {
    BackgroundPlanner planner(absl::Hours(1));
    planner.Start("job-1", Endless(cancelled));
    EXPECT_EQ(planner.Take("job-1", absl::Milliseconds(20)), std::nullopt);
  }
  EXPECT_EQ(cancelled, 1);
}

}  // namespace
}  // namespace chimera::coordinator
