#include "client/job_output.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chimera::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A planned Chimera job of two ranks, predicted at 0.2 s a step with ranks
// idle 10 and 30 % of it, before its first step.
chimera::v1::Job PlannedJob() {
  chimera::v1::Job job;
  job.set_id("gpt-chimera-1a2b3c4d");
  job.mutable_status()->set_state(chimera::v1::JOB_STATE_RUNNING);
  chimera::v1::Plan& plan = *job.mutable_plan();
  plan.set_scheme("chimera");
  plan.set_width(1);
  plan.set_depth(2);
  plan.set_micro_batch_size(4);
  plan.set_micro_batches(2);
  plan.set_pipelines(2);
  plan.mutable_prediction()->set_iteration_seconds(0.2);
  plan.mutable_prediction()->set_bubble_ratio(0.2);
  plan.mutable_prediction()->add_rank_bubble_ratios(0.1);
  plan.mutable_prediction()->add_rank_bubble_ratios(0.3);
  return job;
}

TEST(JobOutputTest, DescribeShowsThePlanAndItsPredictionBeforeTheFirstStep) {
  const std::string page = FormatJobDescription(PlannedJob());
  EXPECT_THAT(page, HasSubstr("plan: chimera, W=1 D=2, micro-batch 4 x 2, pipelines 2"));
  EXPECT_THAT(page, HasSubstr("predicted: step 0.200 s, bubble 0.200\n"));
  EXPECT_THAT(page, Not(HasSubstr("measured")));
}

// An asynchronous plan says that its weights are not mini-batch SGD's; a
// replicated one names its replication.
TEST(JobOutputTest, DescribeWarnsOfAsynchronousTrainingAndNamesReplication) {
  EXPECT_THAT(FormatJobDescription(PlannedJob()),
              Not(HasSubstr("asynchronous")));
  chimera::v1::Job job = PlannedJob();
  job.mutable_plan()->set_scheme("pipedream-2bw");
  EXPECT_THAT(FormatJobDescription(job),
              HasSubstr("\nasynchronous: each step runs on the weights one "
                        "update old, so the weights are not those of "
                        "mini-batch SGD\n"));
  job.mutable_plan()->set_scheme("pipedream");
  EXPECT_THAT(FormatJobDescription(job),
              HasSubstr("\nasynchronous: every micro-batch updates its stage"));
  job.mutable_plan()->set_scheme("1f1b");
  job.mutable_plan()->set_replication("2:1");
  EXPECT_THAT(FormatJobDescription(job),
              HasSubstr("plan: 1f1b, W=1 D=2, micro-batch 4 x 2, pipelines 2, "
                        "replication 2:1\n"));
}

TEST(JobOutputTest, StatusWordsARestartedJobsRestartsAndTheirLastCause) {
  chimera::v1::Job job = PlannedJob();
  EXPECT_THAT(FormatJobStatus(job), Not(HasSubstr("restarts:")));
  job.mutable_status()->set_restarts(2);
  job.mutable_status()->set_restart_cause("worker w1 (rank 1) died");
  EXPECT_THAT(FormatJobStatus(job),
              HasSubstr("\nrestarts: 2 (the last: worker w1 (rank 1) died)\n"));
  EXPECT_THAT(FormatJobStatus(job), Not(HasSubstr("left out:")));
  for (const char* hung : {"w3", "w5"}) {
    job.mutable_status()->add_left_out_workers()->set_worker_id(hung);
  }
  EXPECT_THAT(
      FormatJobStatus(job),
      HasSubstr(
          "\nleft out: w3, w5 (hung or straggled in a run; each again once "
          "its daemon restarts)\n"));
  chimera::v1::StragglingRank& straggler =
      *job.mutable_status()->add_stragglers();
  straggler.set_rank(2);
  straggler.set_worker_id("w2");
  straggler.set_slowdown(2.14);
  straggler.set_since_step(12);
  EXPECT_THAT(FormatJobStatus(job),
              HasSubstr("\nstragglers: rank 2 on worker w2 (2.1x its peers' "
                        "compute since step 12)\n"));
}

TEST(JobOutputTest,
     DescribeListsEachRecoveryWithItsPlansCheckpointAndDowntime) {
  chimera::v1::Job job = PlannedJob();
  EXPECT_THAT(FormatJobDescription(job), Not(HasSubstr("recoveries")));
  chimera::v1::JobRecovery& lost = *job.mutable_status()->add_recoveries();
  lost.set_cause("stalled");
  lost.set_reason("rank 1 on worker w1 reported no step for 3s");
  lost.set_time(0);
  lost.set_from_plan("chimera W=1 D=4 on 4 workers");
  lost.set_to_plan("zb-h2 W=1 D=3 on 3 workers");
  lost.set_checkpoint_step(8);
  lost.set_seconds_not_training(5.24);
  chimera::v1::JobRecovery& growing = *job.mutable_status()->add_recoveries();
  growing.set_cause("grow");
  growing.set_reason("growing from 3 to 4 workers");
  growing.set_from_plan("zb-h2 W=1 D=3 on 3 workers");
  growing.set_checkpoint_step(12);
  const std::string page = FormatJobDescription(job);
  EXPECT_THAT(page, HasSubstr("\nrecoveries (latest last):\n  "));
  EXPECT_THAT(page,
              HasSubstr(" recovery (stalled): chimera W=1 D=4 on 4 workers -> "
                        "zb-h2 W=1 D=3 on 3 workers from step 8, not training "
                        "for 5.2 s: rank 1 on worker w1 reported no step for "
                        "3s\n"));
  EXPECT_THAT(page,
              HasSubstr(" recovery (grow): zb-h2 W=1 D=3 on 3 workers -> - "
                        "from step 12, not started again yet: growing"));
}

TEST(JobOutputTest, DescribePutsTheMeasuredStepAndEachRanksBubbleBesideThePrediction) {
  chimera::v1::Job job = PlannedJob();
  chimera::v1::StepSummary& last = *job.mutable_status()->mutable_last_step();
  last.set_step(4);
  last.set_step_seconds(0.25);
  last.set_bubble_ratio(0.35);
  for (int rank : {0, 1, 2}) {
    chimera::v1::WorkerSummary& worker = *job.add_workers();
    worker.set_rank(rank);
    worker.set_worker_id("w" + std::to_string(rank));
    worker.set_bubble_ratio(0.4 + 0.1 * rank);
  }
  const std::string page = FormatJobDescription(job);
  EXPECT_THAT(page, HasSubstr("predicted: step 0.200 s, bubble 0.200; measured (step 5): "
                              "step 0.250 s, bubble 0.350 (+25.0%)"));
  EXPECT_THAT(page, HasSubstr("PREDICTED"));
  EXPECT_THAT(page, HasSubstr("0     w0                   0.400    0.100"));
  EXPECT_THAT(page, HasSubstr("1     w1                   0.500    0.300"));
  // A rank the prediction does not cover (a replica it left out) says so.
  EXPECT_THAT(page, HasSubstr("2     w2                   0.600    -"));
}

TEST(JobOutputTest, TheWideWorkerTableShowsTheOpEachTaskIsIn) {
  chimera::v1::WorkerInfo busy;
  busy.set_worker_id("w1");
  busy.set_state(chimera::v1::WORKER_STATE_BUSY);
  chimera::v1::TaskPosition& position = *busy.mutable_task_position();
  position.set_step(7);
  position.set_op("FORWARD chunk=0 stage=1 mb=2");
  position.set_op_seconds(3.14);
  position.set_process_stopped(true);
  chimera::v1::WorkerInfo idle;
  idle.set_worker_id("w2");
  idle.set_state(chimera::v1::WORKER_STATE_IDLE);
  const std::string table = FormatWorkerTable({busy, idle}, /*wide=*/true);
  EXPECT_THAT(table, HasSubstr("OP"));
  EXPECT_THAT(
      table,
      HasSubstr("step 7: FORWARD chunk=0 stage=1 mb=2 for 3.1 s (stopped)"));
  EXPECT_THAT(FormatWorkerTable({busy}), Not(HasSubstr("FORWARD")));
}

TEST(JobOutputTest, ARunsMeasurementIsItsMedianStepAfterTheFirstTenth) {
  const chimera::v1::Job job = PlannedJob();
  std::vector<chimera::v1::StepSummary> steps;
  // Twenty steps: two slow warm-up steps, then 0.21 to 0.39 s.
  for (int step = 0; step < 20; ++step) {
    chimera::v1::StepSummary& summary = steps.emplace_back();
    summary.set_step(step);
    summary.set_step_seconds(step < 2 ? 5.0 : 0.2 + 0.01 * (step - 1));
    summary.set_bubble_ratio(step / 100.0);
  }
  // Steps 3 to 20 take 0.21 ... 0.38 s: the upper median is step 12's 0.30 s.
  EXPECT_EQ(FormatPredictedAgainstSteps(job, steps),
            "predicted: step 0.200 s, bubble 0.200; measured (median of steps "
            "3-20): step 0.300 s, bubble 0.110 (+50.0%)\n");
  // Before the first step, only the prediction.
  EXPECT_EQ(FormatPredictedAgainstSteps(job, {}),
            "predicted: step 0.200 s, bubble 0.200\n");
}

// The plan's peak memory, against the largest peak any rank reported.
TEST(JobOutputTest, MemoryIsThePlansPeakAgainstTheLargestRanks) {
  chimera::v1::Job job = PlannedJob();
  EXPECT_EQ(FormatMemoryAgainstMeasured(job), "");
  job.mutable_plan()->mutable_prediction()->set_peak_memory_bytes_max(
      int64_t{10} << 20);
  EXPECT_EQ(FormatMemoryAgainstMeasured(job),
            "memory: predicted peak 10.0 MiB (the largest rank's)\n");
  job.add_workers()->set_peak_memory_bytes(int64_t{9} << 20);
  job.add_workers()->set_peak_memory_bytes(int64_t{11} << 20);
  EXPECT_EQ(FormatMemoryAgainstMeasured(job),
            "memory: predicted peak 10.0 MiB (the largest rank's); measured "
            "11.0 MiB (+10.0%)\n");
  EXPECT_THAT(FormatJobDescription(job),
              HasSubstr("measured 11.0 MiB (+10.0%)\n"));
}

}  // namespace
}  // namespace chimera::client
