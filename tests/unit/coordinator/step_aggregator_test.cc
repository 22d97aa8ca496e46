// A job's steps from its ranks' reports: complete once every rank reported,
// folded into the summary users follow, and recorded in the job with its
// workers' view and its latest complete checkpoint.
#include "coordinator/step_aggregator.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/tiny_job.h"

namespace chimera::coordinator {
namespace {

chimera::v1::WorkerStepMetrics Report(int step, double loss, double seconds,
                                      double bubble_seconds,
                                      int checkpoint_step = 0) {
  chimera::v1::WorkerStepMetrics metrics;
  metrics.set_step(step);
  metrics.set_loss(loss);
  metrics.set_step_seconds(seconds);
  metrics.set_bubble_seconds(bubble_seconds);
  metrics.set_peak_memory_bytes(static_cast<int64_t>(seconds * 1000));
  metrics.set_checkpoint_step(checkpoint_step);
  return metrics;
}

TEST(StepAggregatorTest, AStepCompletesWhenItsLastRankReportsIt) {
  StepAggregator steps(3);
  EXPECT_FALSE(steps.Add(0, Report(0, 0, 1, 0)));
  EXPECT_FALSE(steps.Add(2, Report(0, 0, 1, 0)));
  // A rank reporting again (its report resent) replaces its report.
  EXPECT_FALSE(steps.Add(2, Report(0, 1.5, 1, 0)));
  const std::optional<CompletedStep> done = steps.Add(1, Report(0, 0, 1, 0));
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->step, 0);
  ASSERT_EQ(done->ranks.size(), 3u);
  EXPECT_EQ(done->ranks.at(2).loss(), 1.5);
}

TEST(StepAggregatorTest, ACompleteStepDropsTheIncompleteOnesBeforeIt) {
  StepAggregator steps(2);
  // Rank 1's report of step 0 was lost; step 1 completes without it.
  EXPECT_FALSE(steps.Add(0, Report(0, 0, 1, 0)));
  EXPECT_FALSE(steps.Add(0, Report(1, 0, 1, 0)));
  ASSERT_TRUE(steps.Add(1, Report(1, 0, 1, 0)).has_value());
  // Step 0 is forgotten: its late report completes nothing.
  EXPECT_FALSE(steps.Add(1, Report(0, 0, 1, 0)));
}

// The tiny job on a global batch of 8 samples of 128 tokens.
chimera::v1::TrainJob Manifest() {
  chimera::v1::TrainJob manifest = chimera::testing::TinyJob();
  manifest.mutable_spec()->mutable_training()->set_global_batch_size(8);
  manifest.mutable_spec()->mutable_model()->set_seq_length(128);
  return manifest;
}

TEST(StepAggregatorTest, TheSummarySumsTheLossSharesAndTakesTheSlowestRank) {
  CompletedStep step{4, {{0, Report(4, 0.25, 2.0, 0.5)}, {1, Report(4, 0.5, 4.0, 2.0)}}};
  const chimera::v1::StepSummary summary = Summarize(step, Manifest());
  EXPECT_EQ(summary.step(), 4);
  EXPECT_DOUBLE_EQ(summary.loss(), 0.75);
  EXPECT_DOUBLE_EQ(summary.step_seconds(), 4.0);
  EXPECT_DOUBLE_EQ(summary.bubble_ratio(), (0.25 + 0.5) / 2);
  EXPECT_EQ(summary.peak_memory_bytes(), 4000);
  EXPECT_DOUBLE_EQ(summary.samples_per_second(), 2.0);
  EXPECT_DOUBLE_EQ(summary.tokens_per_second(), 256.0);
}

TEST(StepAggregatorTest, ACheckpointIsCompleteOnlyOnceEveryRankWroteItsShare) {
  chimera::v1::Job job;
  *job.mutable_manifest() = Manifest();
  job.mutable_status()->set_checkpoint_step(2);
  const absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  RecordStep({3, {{0, Report(3, 0, 1, 0, 4)}, {1, Report(3, 0, 1, 0, 0)}}},
             {"w0", "w1"}, now, &job);
  EXPECT_EQ(job.status().completed_steps(), 4);
  EXPECT_EQ(job.status().checkpoint_step(), 2) << "rank 1 did not write";
  EXPECT_EQ(job.status().last_step().end_time(), 1'800'000'000);
  RecordStep({3, {{0, Report(3, 0, 1, 0, 4)}, {1, Report(3, 0, 1, 0, 4)}}},
             {"w0", "w1"}, now, &job);
  EXPECT_EQ(job.status().checkpoint_step(), 4);
  // Ranks write in the background and report the latest they finished:
  // the least of those is complete, and what was recorded never goes back.
  RecordStep({5, {{0, Report(5, 0, 1, 0, 6)}, {1, Report(5, 0, 1, 0, 5)}}},
             {"w0", "w1"}, now, &job);
  EXPECT_EQ(job.status().checkpoint_step(), 5);
  RecordStep({6, {{0, Report(6, 0, 1, 0, 6)}, {1, Report(6, 0, 1, 0, 0)}}},
             {"w0", "w1"}, now, &job);
  EXPECT_EQ(job.status().checkpoint_step(), 5);
  ASSERT_EQ(job.workers_size(), 2);
  EXPECT_EQ(job.workers(1).worker_id(), "w1");
  EXPECT_EQ(job.workers(1).rank(), 1);
}

// Rank 0 starts where the disk's latest complete checkpoint is, which may
// be behind what the coordinator saw (files lost): the disk decides.
TEST(StepAggregatorTest, TheFirstStepOnDiskIsRecordedAsTheStepsDone) {
  chimera::v1::Job job;
  *job.mutable_manifest() = Manifest();
  job.mutable_manifest()->mutable_spec()->mutable_training()->set_max_steps(10);
  job.mutable_status()->set_completed_steps(6);
  job.mutable_status()->set_checkpoint_step(6);
  EXPECT_FALSE(*RecordFirstStep(6, &job)) << "nothing to change";
  EXPECT_TRUE(*RecordFirstStep(4, &job));
  EXPECT_EQ(job.status().completed_steps(), 4);
  EXPECT_EQ(job.status().checkpoint_step(), 4);
  EXPECT_TRUE(RecordFirstStep(10, &job).ok()) << "every step done";
  const absl::StatusOr<bool> beyond = RecordFirstStep(11, &job);
  EXPECT_EQ(beyond.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(beyond.status().message()),
              ::testing::HasSubstr("first_step: 11 is outside the job's steps "
                                   "[0, 10]"));
  EXPECT_EQ(RecordFirstStep(-1, &job).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(job.status().completed_steps(), 10);
}

}  // namespace
}  // namespace chimera::coordinator
