// Who waits for a job's trace: the step a TraceJob may wait for,
// timelines wanted from the first step a waiter accepts until every
// waiter's step is recorded, a trace of a run that ended kept for its
// waiters, and the last waiter to leave ending it.
#include "coordinator/trace_waits.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chimera::coordinator {
namespace {

std::optional<TraceCollector::Step> RecordedStep(int step) {
  TraceCollector::Step recorded;
  recorded.step = step;
  return recorded;
}

using ::testing::HasSubstr;

TEST(TraceWaitsTest, ATraceWaitsForTheNextStepOrOneTheRunStillHolds) {
  chimera::v1::Job job;
  job.set_id("job-1");
  job.mutable_manifest()->mutable_spec()->mutable_training()->set_max_steps(10);
  job.mutable_status()->set_state(chimera::v1::JOB_STATE_RUNNING);
  job.mutable_status()->set_completed_steps(4);
  EXPECT_EQ(StepToTrace(job, std::nullopt, std::nullopt).value(), 4);
  EXPECT_EQ(StepToTrace(job, 9, std::nullopt).value(), 9);
  EXPECT_EQ(StepToTrace(job, 3, /*held=*/3).value(), 3);
  const absl::StatusOr<int> gone = StepToTrace(job, 2, /*held=*/3);
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(gone.status().message(),
              HasSubstr("job job-1 has already run step 2 and holds no trace"));
  EXPECT_THAT(StepToTrace(job, 10, std::nullopt).status().message(),
              HasSubstr("step: 10 is not a step of job job-1 (it runs steps 0 "
                        "to 9)"));
  job.mutable_status()->set_state(chimera::v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(StepToTrace(job, std::nullopt, std::nullopt).status().code(),
            absl::StatusCode::kFailedPrecondition);
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
