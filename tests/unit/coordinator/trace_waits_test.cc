// Who waits for a job's trace: timelines are wanted from the first step a
// waiter accepts until every waiter's step is recorded, a trace of a run
// that ended is kept for its waiters, and the last waiter to leave ends it.
#include "coordinator/trace_waits.h"

#include "gtest/gtest.h"

namespace chimera::coordinator {
namespace {

std::optional<TraceCollector::Step> RecordedStep(int step) {
  TraceCollector::Step recorded;
  recorded.step = step;
  return recorded;
}

TEST(TraceWaitsTest, TimelinesAreWantedFromAWaitersStepUntilEveryWaitersIsRecorded) {
  TraceWaits waits;
  EXPECT_FALSE(waits.WantsTimelines("job", std::nullopt));
  waits.Add("job", 5);
  waits.Add("job", 8);
  EXPECT_TRUE(waits.WantsTimelines("job", std::nullopt));
  EXPECT_FALSE(waits.Wanted("job", 4, std::nullopt)) << "before any waiter's step";
  EXPECT_TRUE(waits.Wanted("job", 5, std::nullopt));
  EXPECT_TRUE(waits.Wanted("job", 9, RecordedStep(6))) << "the waiter of 8 waits";
  // Step 8 recorded: every waiter's step is, so recording stops and the
  // trace is not replaced before they read it.
  EXPECT_FALSE(waits.Wanted("job", 9, RecordedStep(8)));
  EXPECT_FALSE(waits.WantsTimelines("job", RecordedStep(8)));
  EXPECT_FALSE(waits.WantsTimelines("other", std::nullopt));
}

TEST(TraceWaitsTest, AnEndedRunsTraceIsKeptForItsWaitersUntilTheLastLeaves) {
  TraceWaits waits;
  chimera::v1::JobTrace trace;
  trace.set_step(3);
  waits.RunEnded("job", trace);
  EXPECT_EQ(waits.EndedTrace("job"), nullptr) << "nobody waited";

  waits.Add("job", 3);
  waits.Add("job", 3);
  waits.RunEnded("job", trace);
  ASSERT_NE(waits.EndedTrace("job"), nullptr);
  EXPECT_EQ(waits.EndedTrace("job")->step(), 3);
  EXPECT_FALSE(waits.Remove("job", 3)) << "one waiter is left";
  EXPECT_TRUE(waits.Waiting("job"));
  EXPECT_TRUE(waits.Remove("job", 3));
  EXPECT_FALSE(waits.Waiting("job"));
  EXPECT_EQ(waits.EndedTrace("job"), nullptr);
  EXPECT_FALSE(waits.Remove("job", 3)) << "no wait to end";
}

}  // namespace
}  // namespace chimera::coordinator
