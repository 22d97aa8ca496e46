#include "coordinator/trace_collector.h"

#include "gtest/gtest.h"

namespace chimera::coordinator {
namespace {

chimera::v1::StepTimeline Timeline(double start) {
  chimera::v1::StepTimeline timeline;
  timeline.set_start_time(start);
  return timeline;
}

TEST(TraceCollectorTest, StepCompletesOnceEveryRankRecordedIt) {
  TraceCollector traces(3);
  EXPECT_FALSE(traces.Add(5, 0, Timeline(10)));
  EXPECT_FALSE(traces.Add(5, 2, Timeline(12)));
  EXPECT_FALSE(traces.complete().has_value());
  EXPECT_TRUE(traces.Add(5, 1, Timeline(11)));
  ASSERT_TRUE(traces.complete().has_value());
  EXPECT_EQ(traces.complete()->step, 5);
  ASSERT_EQ(traces.complete()->ranks.size(), 3u);
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(traces.complete()->ranks[rank].start_time(), 10 + rank);
  }
}

TEST(TraceCollectorTest, IgnoresOldStepsAndRanksOutsideTheRun) {
  TraceCollector traces(2);
  traces.Add(3, 0, Timeline(0));
  traces.Add(3, 1, Timeline(0));
  EXPECT_FALSE(traces.Add(2, 0, Timeline(0)));
  EXPECT_FALSE(traces.Add(2, 1, Timeline(0)));
  EXPECT_FALSE(traces.Add(4, 2, Timeline(0)));
  EXPECT_FALSE(traces.Add(4, -1, Timeline(0)));
  EXPECT_EQ(traces.complete()->step, 3);
}

TEST(TraceCollectorTest, KeepsAtMostALimitedNumberOfPartialSteps) {
  TraceCollector traces(2);
  // Rank 1 never records: only the newest partial steps are kept, so rank
  // 1's late record of an early step no longer completes it.
  for (int step = 0; step < 3 * TraceCollector::kMaxPartialSteps; ++step) {
    traces.Add(step, 0, Timeline(step));
  }
  EXPECT_FALSE(traces.Add(0, 1, Timeline(0)));
  const int recent = 3 * TraceCollector::kMaxPartialSteps - 1;
  EXPECT_TRUE(traces.Add(recent, 1, Timeline(recent)));
  EXPECT_EQ(traces.complete()->step, recent);
}

TEST(TraceCollectorTest, DropPartialKeepsTheCompleteStep) {
  TraceCollector traces(2);
  traces.Add(1, 0, Timeline(0));
  traces.Add(1, 1, Timeline(0));
  traces.Add(2, 0, Timeline(0));
  traces.DropPartial();
  EXPECT_FALSE(traces.Add(2, 1, Timeline(0)));
  EXPECT_EQ(traces.complete()->step, 1);
}

}  // namespace
}  // namespace chimera::coordinator
