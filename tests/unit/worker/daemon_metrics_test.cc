#include "worker/daemon/daemon_metrics.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"

namespace chimera::worker {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Page(const DaemonMetrics& metrics) {
  return prometheus::TextSerializer().Serialize(metrics.Collect());
}

TEST(DaemonMetricsTest, IdleWorkerShowsItsIdentityAndNoTask) {
  DaemonMetrics metrics("w0", "node-a", "SkylakeX");
  metrics.SetRegistered(true);
  const std::string page = Page(metrics);
  EXPECT_THAT(
      page,
      HasSubstr(
          "chimera_worker_info{worker=\"w0\",node=\"node-a\",version=\""));
  EXPECT_THAT(page, HasSubstr(",blas_core=\"SkylakeX\"} 1"));
  EXPECT_THAT(page, HasSubstr("chimera_worker_registered 1"));
  EXPECT_THAT(page,
              HasSubstr("chimera_worker_tasks_total{outcome=\"succeeded\"} 0"));
  EXPECT_THAT(page, HasSubstr("chimera_worker_steps_total 0"));
  EXPECT_THAT(page, Not(HasSubstr("chimera_worker_task{")));
}

TEST(DaemonMetricsTest, RunningTaskShowsItsLastStepUntilItEnds) {
  DaemonMetrics metrics("w0", "node-a", "SkylakeX");
  metrics.TaskStarted(
      {.job_id = "job-7", .rank = 2, .memory_limit_bytes = 4000});
  EXPECT_THAT(
      Page(metrics),
      HasSubstr("chimera_worker_task{train_job=\"job-7\",rank=\"2\"} 1"));
  EXPECT_THAT(Page(metrics), HasSubstr("chimera_worker_memory_limit_bytes{"
                                       "train_job=\"job-7\",rank=\"2\"} 4000"));
  EXPECT_THAT(Page(metrics), Not(HasSubstr("chimera_worker_loss")));

  chimera::v1::WorkerStepMetrics step;
  step.set_step(4);
  step.set_loss(2.5);
  step.set_step_seconds(2);
  step.set_bubble_seconds(0.5);
  step.set_busy_seconds(1.5);
  step.set_samples(8);
  step.set_tokens(256);
  step.set_peak_memory_bytes(1000);
  metrics.StepDone(step);
  const std::string page = Page(metrics);
  EXPECT_THAT(
      page, HasSubstr("chimera_worker_step{train_job=\"job-7\",rank=\"2\"} 4"));
  EXPECT_THAT(
      page,
      HasSubstr("chimera_worker_loss{train_job=\"job-7\",rank=\"2\"} 2.5"));
  EXPECT_THAT(
      page,
      HasSubstr(
          "chimera_worker_bubble_ratio{train_job=\"job-7\",rank=\"2\"} 0.25"));
  EXPECT_THAT(page, HasSubstr("chimera_worker_samples_per_second{train_job="
                              "\"job-7\",rank=\"2\"} 4"));
  EXPECT_THAT(page, HasSubstr("chimera_worker_tokens_per_second{train_job="
                              "\"job-7\",rank=\"2\"} 128"));
  EXPECT_THAT(page,
              HasSubstr("chimera_worker_memory_bytes{train_job=\"job-7\",rank="
                        "\"2\",kind=\"peak\"} 1000"));
  EXPECT_THAT(page, HasSubstr("chimera_worker_busy_ratio{train_job=\"job-7\","
                              "rank=\"2\"} 0.75"));
  EXPECT_THAT(page, HasSubstr("chimera_worker_steps_total 1"));

  metrics.TaskEnded("failed");
  const std::string after = Page(metrics);
  EXPECT_THAT(after,
              HasSubstr("chimera_worker_tasks_total{outcome=\"failed\"} 1"));
  EXPECT_THAT(after, HasSubstr("chimera_worker_steps_total 1"));
  EXPECT_THAT(after, Not(HasSubstr("job-7")));
}

TEST(DaemonMetricsTest, OpSecondsAndStepDurationsAddUpOverTheTasksSteps) {
  DaemonMetrics metrics("w0", "node-a", "SkylakeX");
  metrics.TaskStarted({.job_id = "job-7", .rank = 0});
  chimera::v1::WorkerStepMetrics step;
  step.set_step_seconds(0.2);
  step.mutable_seconds_by_op()->set_forward(0.05);
  step.mutable_seconds_by_op()->set_recv(0.125);
  metrics.StepDone(step);
  step.set_step(1);
  step.set_step_seconds(3);
  metrics.StepDone(step);
  const std::string page = Page(metrics);
  EXPECT_THAT(page,
              HasSubstr("chimera_worker_op_seconds_total{train_job=\"job-7\","
                        "rank=\"0\",op=\"forward\"} 0.1\n"));
  EXPECT_THAT(page,
              HasSubstr("chimera_worker_op_seconds_total{train_job=\"job-7\","
                        "rank=\"0\",op=\"recv\"} 0.25\n"));
  EXPECT_THAT(page,
              HasSubstr("chimera_worker_op_seconds_total{train_job=\"job-7\","
                        "rank=\"0\",op=\"optimizer\"} 0\n"));
  EXPECT_THAT(page, HasSubstr("chimera_worker_step_duration_seconds_count{"
                              "train_job=\"job-7\",rank=\"0\"} 2"));
  EXPECT_THAT(page, HasSubstr("chimera_worker_step_duration_seconds_sum{"
                              "train_job=\"job-7\",rank=\"0\"} 3.2"));
  EXPECT_THAT(page, HasSubstr("chimera_worker_step_duration_seconds_bucket{"
                              "train_job=\"job-7\",rank=\"0\",le=\"0.25\"} 1"));
  EXPECT_THAT(page, HasSubstr("chimera_worker_step_duration_seconds_bucket{"
                              "train_job=\"job-7\",rank=\"0\",le=\"5\"} 2"));
}

TEST(DaemonMetricsTest, GpuTaskSeriesNameTheirDeviceForDcgmJoins) {
  DaemonMetrics metrics("w0", "node-a", "SkylakeX");
  metrics.TaskStarted({.job_id = "job-7", .rank = 1, .gpu = 3});
  EXPECT_THAT(Page(metrics),
              HasSubstr("chimera_worker_task{train_job=\"job-7\","
                        "rank=\"1\",gpu=\"3\"} 1"));
}

}  // namespace
}  // namespace chimera::worker
