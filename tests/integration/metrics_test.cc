// /metrics of a real coordinator and of real worker daemons: well-formed for
// promtool, counting what they hold and do, and scraped by a real
// Prometheus.
#include <signal.h>

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/coordinator_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jobspec/job_file.h"
#include "net/http_get.h"
#include "planner/analytic_profile.h"
#include "tests/support/coordinator_process.h"
#include "tests/support/prometheus_process.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/wait_until.h"
#include "tests/support/worker_process.h"

namespace chimera {
namespace {

using ::chimera::net::HttpGet;
using ::chimera::testing::AwaitAnnouncedAddress;
using ::chimera::testing::ChildProcess;
using ::chimera::testing::CoordinatorProcess;
using ::chimera::testing::PrometheusProcess;
using ::chimera::testing::RunProcess;
using ::chimera::testing::WaitUntil;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr absl::Duration kStartTimeout = absl::Seconds(30);
constexpr absl::Duration kScrapeTimeout = absl::Seconds(60);
constexpr absl::Duration kJobTimeout = absl::Seconds(120);

// The /metrics page at `address` once it holds `needle`, or the last page
// scraped when `timeout` passes first.
absl::StatusOr<std::string> ScrapeUntil(const std::string& address,
                                        absl::string_view needle,
                                        absl::Duration timeout) {
  absl::StatusOr<std::string> page;
  WaitUntil(
      [&] {
        page = HttpGet(address, "/metrics");
        return !page.ok() || absl::StrContains(*page, needle);
      },
      timeout);
  return page;
}

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<CoordinatorProcess> coordinator = CoordinatorProcess::Start(
        CHIMERA_COORDINATOR_BINARY,
        {"--db", ":memory:", "--metrics-listen", "127.0.0.1:0"});
    ASSERT_TRUE(coordinator.ok()) << coordinator.status();
    coordinator_ = *std::move(coordinator);
    absl::StatusOr<std::string> metrics =
        AwaitAnnouncedAddress(coordinator_->process(), "metrics on ");
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    metrics_ = *metrics;
    client::ConnectionOptions options;
    options.address = coordinator_->address();
    client_ = *client::CoordinatorClient::Connect(options);
  }

  static chimera::v1::TrainJob ExampleJob() {
    absl::StatusOr<chimera::v1::TrainJob> job = jobspec::LoadJobFile(
        std::string(CHIMERA_SOURCE_DIR) + "/examples/chimera.yaml",
        chimera::jobspec::SpecOnly());
    EXPECT_TRUE(job.ok()) << job.status();
    return *job;
  }

  // Two jobs that stay pending: there are no workers.
  void SubmitTwoPendingJobs() {
    ASSERT_TRUE(client_->Submit(ExampleJob()).ok());
    ASSERT_TRUE(client_->Submit(ExampleJob()).ok());
  }

  // Starts `count` worker daemons serving /metrics, with `flags` besides;
  // their metrics addresses once each has registered.
  std::vector<std::string> StartWorkers(
      int count, const std::vector<std::string>& flags = {}) {
    std::vector<std::string> addresses;
    for (int i = 0; i < count; ++i) {
      std::vector<std::string> all_flags = {"--metrics-listen", "127.0.0.1:0"};
      all_flags.insert(all_flags.end(), flags.begin(), flags.end());
      workers_.push_back(testing::StartWorkerDaemon(
          {.binary = CHIMERA_WORKER_BINARY,
           .coordinator = coordinator_->address(),
           .worker_id = absl::StrCat("w", i),
           .work_dir = absl::StrCat(dir_.path(), "/w", i),
           .flags = all_flags,
           .working_dir = CHIMERA_SOURCE_DIR}));
      absl::StatusOr<std::string> address =
          AwaitAnnouncedAddress(*workers_.back(), "metrics on ");
      EXPECT_TRUE(address.ok()) << address.status();
      if (address.ok()) addresses.push_back(*address);
    }
    for (const std::string& address : addresses) {
      EXPECT_TRUE(
          ScrapeUntil(address, "chimera_worker_registered 1", kStartTimeout)
              .ok());
    }
    return addresses;
  }

  // The example job on two pipeline stages, `steps` long.
  absl::StatusOr<chimera::v1::Job> SubmitTwoStageJob(int steps) {
    chimera::v1::TrainJob job = ExampleJob();
    job.mutable_spec()->mutable_parallelism()->set_pipeline(2);
    job.mutable_spec()->mutable_resources()->set_workers(2);
    job.mutable_spec()->mutable_training()->set_max_steps(steps);
    return client_->Submit(job);
  }

  void ExpectPromtoolAccepts(const std::string& page) {
    const std::string file = dir_.WriteFile("metrics.txt", page);
    auto check =
        RunProcess({"/bin/sh", "-c", "promtool check metrics < " + file});
    EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  }

  chimera::testing::TempDir dir_;
  std::optional<CoordinatorProcess> coordinator_;
  std::string metrics_;
  std::unique_ptr<client::CoordinatorClient> client_;
  std::vector<std::unique_ptr<net::ChildProcess>> workers_;
};

TEST_F(MetricsTest, CoordinatorMetricsCountJobsAndPassPromtool) {
  SubmitTwoPendingJobs();
  absl::StatusOr<std::string> page = HttpGet(metrics_, "/metrics");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, HasSubstr("chimera_jobs{state=\"pending\"} 2"));
  EXPECT_THAT(*page, HasSubstr("chimera_jobs{state=\"running\"} 0"));
  EXPECT_THAT(*page, HasSubstr("chimera_workers{state=\"idle\"} 0"));
  EXPECT_THAT(*page, HasSubstr("chimera_build_info{version=\"0."));
  EXPECT_THAT(
      *page,
      HasSubstr("chimera_job_recoveries_total{cause=\"worker_lost\"} 0"));
  EXPECT_THAT(
      *page,
      HasSubstr("chimera_job_recovery_duration_seconds_bucket{le=\"+Inf\"} 0"));
  ExpectPromtoolAccepts(*page);
}

TEST_F(MetricsTest, RealPrometheusScrapesTheCoordinator) {
  SubmitTwoPendingJobs();
  const std::string config = dir_.WriteFile(
      "prometheus.yml", absl::StrCat("global: {scrape_interval: 1s}\n"
                                     "scrape_configs:\n"
                                     "  - job_name: chimera\n"
                                     "    static_configs: [{targets: ['",
                                     metrics_, "']}]\n"));
  absl::StatusOr<std::unique_ptr<PrometheusProcess>> prometheus =
      PrometheusProcess::Start(config, dir_.path(), kScrapeTimeout);
  ASSERT_TRUE(prometheus.ok()) << prometheus.status();
  std::string answer;
  WaitUntil(
      [&] {
        absl::StatusOr<std::string> result =
            (*prometheus)->Query("chimera_jobs{state=\"pending\"}");
        if (result.ok()) answer = *result;
        return result.ok() && absl::StrContains(*result, "\"2\"]");
      },
      kScrapeTimeout, absl::Milliseconds(500));
  EXPECT_THAT(answer, HasSubstr("\"job\":\"chimera\""))
      << "Prometheus never scraped chimera_jobs{state=\"pending\"} = 2";
}

TEST_F(MetricsTest, WorkerDaemonsServeTheirOwnMetrics) {
  const std::vector<std::string> metrics = StartWorkers(2);
  ASSERT_EQ(metrics.size(), 2u);
  absl::StatusOr<std::string> page = HttpGet(metrics[0], "/metrics");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, HasSubstr("chimera_worker_info{worker=\"w0\""));
  // Debian's LibTorch runs on OpenBLAS: its core is named.
  EXPECT_THAT(*page, ContainsRegex("blas_core=\"[A-Za-z0-9_]+\"} 1"));
  EXPECT_THAT(*page,
              HasSubstr("chimera_worker_tasks_total{outcome=\"succeeded\"} 0"));

  absl::StatusOr<chimera::v1::Job> submitted = SubmitTwoStageJob(3);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  absl::StatusOr<chimera::v1::Job> state;
  WaitUntil(
      [&] {
        state = client_->Get(submitted->id());
        return !state.ok() ||
               state->status().state() == chimera::v1::JOB_STATE_SUCCEEDED ||
               state->status().state() == chimera::v1::JOB_STATE_FAILED;
      },
      kJobTimeout, absl::Milliseconds(200));
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_EQ(state->status().state(), chimera::v1::JOB_STATE_SUCCEEDED)
      << state->status().message();

  for (const std::string& address : metrics) {
    // The daemon counts the task once its process has exited, a moment
    // after the coordinator saw the job succeed.
    page = ScrapeUntil(address, "outcome=\"succeeded\"} 1", kStartTimeout);
    ASSERT_TRUE(page.ok()) << page.status();
    EXPECT_THAT(
        *page,
        HasSubstr("chimera_worker_tasks_total{outcome=\"succeeded\"} 1"));
    EXPECT_THAT(*page, HasSubstr("chimera_worker_steps_total 3"));
    EXPECT_THAT(*page, Not(HasSubstr("chimera_worker_task{")));
    ExpectPromtoolAccepts(*page);
  }
}

// The value of the sample whose name and labels are `series`, e.g.
// `up{job="x"}`, on a Prometheus text page.
std::optional<double> SampleValue(const std::string& page,
                                  const std::string& series) {
  const size_t at = page.find("\n" + series + " ");
  if (at == std::string::npos) return std::nullopt;
  const size_t value = at + series.size() + 2;
  double parsed = 0;
  if (!absl::SimpleAtod(page.substr(value, page.find('\n', value) - value),
                        &parsed)) {
    return std::nullopt;
  }
  return parsed;
}

TEST_F(MetricsTest, RunningJobShowsItsPlanPredictionStepsAndRanks) {
  // Each worker's device: a teraFLOP/s, for the job's utilisation.
  const std::vector<std::string> workers =
      StartWorkers(2, {"--peak-flops", "1e12"});
  ASSERT_EQ(workers.size(), 2u);
  absl::StatusOr<chimera::v1::Job> job = SubmitTwoStageJob(100000);
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string train_job = absl::StrCat("train_job=\"", job->id(), "\"");

  absl::StatusOr<std::string> page =
      ScrapeUntil(metrics_, "chimera_job_bubble_ratio{", kJobTimeout);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, HasSubstr(absl::StrCat(
                         "chimera_job_plan_info{", train_job,
                         ",name=\"gpt-chimera\",scheme=\"chimera\",width=\"1\","
                         "depth=\"2\",")));
  for (const char* series :
       {"chimera_job_step{", "chimera_job_loss{", "chimera_job_step_seconds{",
        "chimera_job_samples_per_second{",
        "chimera_job_model_flops_per_second{", "chimera_job_tokens_per_second{",
        "chimera_job_last_step_timestamp_seconds{",
        "chimera_job_predicted_step_seconds{",
        "chimera_job_predicted_bubble_ratio{"}) {
    EXPECT_THAT(*page, HasSubstr(absl::StrCat(series, train_job, "}")));
  }
  // Of the same step: samples/s times a sample's model FLOPs.
  const std::optional<double> samples_per_second = SampleValue(
      *page, absl::StrCat("chimera_job_samples_per_second{", train_job, "}"));
  const std::optional<double> model_flops = SampleValue(
      *page,
      absl::StrCat("chimera_job_model_flops_per_second{", train_job, "}"));
  ASSERT_TRUE(samples_per_second && model_flops) << *page;
  EXPECT_NEAR(*model_flops,
              *samples_per_second *
                  planner::ModelFlopsPerSample(job->manifest().spec().model()),
              1e-9 * *model_flops);
  EXPECT_GT(*model_flops, 0);
  const std::optional<double> utilization = SampleValue(
      *page,
      absl::StrCat("chimera_job_model_flops_utilization{", train_job, "}"));
  ASSERT_TRUE(utilization.has_value()) << *page;
  EXPECT_NEAR(*utilization, *model_flops / 2e12, 1e-9 * *utilization);
  for (const char* rank : {"0", "1"}) {
    EXPECT_THAT(*page,
                HasSubstr(absl::StrCat("chimera_job_bubble_ratio{", train_job,
                                       ",rank=\"", rank, "\",worker=\"w")));
  }
  ExpectPromtoolAccepts(*page);

  for (const std::string& address : workers) {
    page =
        ScrapeUntil(address, "chimera_worker_op_seconds_total{", kJobTimeout);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const char* series :
         {"chimera_worker_busy_ratio{", "chimera_worker_memory_limit_bytes{",
          "chimera_worker_step_duration_seconds_count{",
          "chimera_worker_op_seconds_total{"}) {
      EXPECT_THAT(*page, HasSubstr(absl::StrCat(series, train_job, ",rank=")));
    }
    for (const char* op :
         {"forward", "backward", "send", "recv", "allreduce", "optimizer"}) {
      EXPECT_THAT(*page, HasSubstr(absl::StrCat("op=\"", op, "\"}")));
    }
    ExpectPromtoolAccepts(*page);
  }

  ASSERT_TRUE(client_->Stop(job->id()).ok());
  page = HttpGet(metrics_, "/metrics");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, Not(HasSubstr(train_job)));
}

}  // namespace
}  // namespace chimera
