// The job lifecycle with in-process fake workers: each test drives the
// registry and the manager exactly as the gRPC services would.
#include "coordinator/job_manager.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/analytic_profile.h"
#include "tests/support/tiny_job.h"
#include "tests/unit/coordinator/lost_backward.h"

namespace chimera::coordinator {
namespace {

using chimera::v1::Job;
using ::testing::HasSubstr;
using ::testing::Not;

// TinyJob made larger: a GPT of 8 blocks (hidden 64, 4 heads, 16 tokens),
// 2 steps on a global batch of 8, on `workers` workers; `fixed`: as Chimera
// over that many stages in as many micro-batches, else everything open.
chimera::v1::TrainJob Manifest(const std::string& name, int workers,
                               bool fixed = true) {
  chimera::v1::TrainJob job = chimera::testing::TinyJob();
  job.mutable_metadata()->set_name(name);
  auto* spec = job.mutable_spec();
  auto* model = spec->mutable_model();
  model->set_num_layers(8);
  model->set_hidden_size(64);
  model->set_num_heads(4);
  model->set_seq_length(16);
  spec->mutable_training()->set_global_batch_size(8);
  spec->mutable_training()->clear_micro_batch_size();
  spec->mutable_training()->set_max_steps(2);
  spec->clear_parallelism();
  if (fixed) {
    spec->mutable_parallelism()->set_schedule("chimera");
    spec->mutable_parallelism()->set_pipeline(workers);
    spec->mutable_parallelism()->set_data(1);
    spec->mutable_parallelism()->set_micro_batches(workers);
  }
  spec->mutable_resources()->set_workers(workers);
  return job;
}

// A job that checkpoints every 2 steps and may restart `backoff_limit` times.
chimera::v1::TrainJob RestartableManifest(int backoff_limit) {
  chimera::v1::TrainJob job = Manifest("restartable", 4);
  job.mutable_spec()->mutable_training()->set_max_steps(10);
  job.mutable_spec()->mutable_training()->set_checkpoint_every(2);
  job.mutable_spec()->mutable_training()->set_checkpoint_dir("checkpoints");
  job.mutable_spec()->mutable_run_policy()->set_backoff_limit(backoff_limit);
  return job;
}

// What w<rank> (incarnation 100 + rank) reports of `step` of `job`, for the
// job's current attempt.
chimera::v1::ReportMetricsRequest StepReport(const Job& job, int rank,
                                             int step) {
  chimera::v1::ReportMetricsRequest report;
  report.set_worker_id(absl::StrCat("w", rank));
  report.set_incarnation(100 + rank);
  report.set_job_id(job.id());
  report.set_rank(rank);
  report.mutable_metrics()->set_step(step);
  return report;
}

class JobManagerTest : public ::testing::Test {
 protected:
  JobManagerTest() : registry_(NewRegistry()) {}

  void SetUp() override {
    absl::StatusOr<std::unique_ptr<JobStore>> store =
        JobStore::Open(":memory:");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    options_.max_workers = 8;
    // Every tick waits for its plan search: jobs start in the tick that
    // queued them, as the tests expect.
    options_.plan_wait = absl::InfiniteDuration();
    options_.launch.links.mutable_intra_node()->set_bandwidth_bytes_per_second(
        1e9);
    options_.launch.links.mutable_inter_node()->set_bandwidth_bytes_per_second(
        1e9);
    manager_ = std::make_unique<JobManager>(store_.get(), registry_.get(),
                                            options_, Clock::Fake([this] { return now_; }));
  }

  std::unique_ptr<WorkerRegistry> NewRegistry() {
    return std::make_unique<WorkerRegistry>(
        HeartbeatPolicy{.period = absl::Seconds(1), .failure_threshold = 3},
        Clock::Fake([this] { return now_; }));
  }

  // The manager again, with `change` made to its options.
  void UseOptions(const std::function<void(JobManagerOptions&)>& change) {
    change(options_);
    manager_ =
        std::make_unique<JobManager>(store_.get(), registry_.get(), options_,
                                     Clock::Fake([this] { return now_; }));
  }

  // A new coordinator on the same store: it knows no worker yet.
  void RestartCoordinator() {
    manager_.reset();
    registry_ = NewRegistry();
    manager_ = std::make_unique<JobManager>(store_.get(), registry_.get(),
                                            options_, Clock::Fake([this] { return now_; }));
    ASSERT_TRUE(manager_->Recover().ok());
  }

  // Worker w<index>, registered by AddWorkers before, registers with the
  // restarted coordinator holding rank `rank` of `job`'s first attempt in
  // `state`; returns whether the coordinator keeps the task running.
  bool RegisterAgainHolding(int index, const Job& job, int rank,
                            chimera::v1::TaskState state, int attempt = 1) {
    const chimera::v1::RegisterWorkerRequest request = Registration(index);
    EXPECT_TRUE(registry_->Register(request).ok());
    chimera::v1::HeldTask task;
    task.set_job_id(job.id());
    task.set_attempt(attempt);
    task.set_rank(rank);
    task.set_state(state);
    return manager_->Adopt(request.worker_id(), task);
  }

  // Worker w<index>'s registration, offering the CPU.
  static chimera::v1::RegisterWorkerRequest Registration(int index) {
    chimera::v1::RegisterWorkerRequest request;
    request.set_worker_id(absl::StrCat("w", index));
    request.set_incarnation(100 + index);
    request.set_node("host");
    request.set_host("host");
    request.set_memory_bytes(int64_t{8} << 30);
    request.add_devices()->set_kind("cpu");
    return request;
  }

  // Workers w<next>, ... offering the CPU and, with `gpu`, the GPU whose
  // index is their number.
  void AddWorkers(int count, bool gpu = false) {
    for (int i = 0; i < count; ++i) {
      chimera::v1::RegisterWorkerRequest request = Registration(next_worker_);
      if (gpu) {
        chimera::v1::Device* device = request.add_devices();
        device->set_kind("gpu");
        device->set_index(next_worker_);
      }
      ASSERT_TRUE(registry_->Register(request).ok());
      ++next_worker_;
    }
  }

  std::optional<chimera::v1::Assignment> Next(const std::string& worker) {
    auto incarnation = registry_->Get(worker)->incarnation();
    absl::StatusOr<std::optional<chimera::v1::Assignment>> next =
        registry_->TakeAssignment(worker, incarnation);
    EXPECT_TRUE(next.ok()) << next.status();
    return next.ok() ? *next : std::nullopt;
  }

  absl::Status Report(const std::string& worker, const Job& job, int rank,
                      chimera::v1::TaskState state,
                      const std::string& extra = "") {
    chimera::v1::ReportTaskStateRequest report;
    report.set_worker_id(worker);
    report.set_incarnation(registry_->Get(worker)->incarnation());
    report.set_job_id(job.id());
    report.set_attempt(1);
    report.set_rank(rank);
    report.set_state(state);
    if (state == chimera::v1::TASK_STATE_READY) report.set_store_address(extra);
    if (state == chimera::v1::TASK_STATE_FAILED) report.set_message(extra);
    return manager_->OnTaskState(report);
  }

  // Every rank w<rank> of the first attempt reports `step`, with
  // `checkpoint_step` (0: none) from the ranks in `wrote`.
  void ReportStep(const Job& job, int step, int checkpoint_step,
                  std::vector<int> wrote = {0, 1, 2, 3}) {
    for (int rank = 0; rank < 4; ++rank) {
      chimera::v1::ReportMetricsRequest report = StepReport(job, rank, step);
      if (std::count(wrote.begin(), wrote.end(), rank) > 0) {
        report.mutable_metrics()->set_checkpoint_step(checkpoint_step);
      }
      ASSERT_TRUE(manager_->OnMetrics(report).ok());
    }
  }

  // One rank's report of `step` (having written `checkpoint_step`, 0:
  // none) from `worker`, for `attempt` of the job.
  absl::Status ReportMetrics(const std::string& worker, const Job& job,
                             int attempt, int rank, int step,
                             int checkpoint_step = 0) {
    chimera::v1::ReportMetricsRequest report;
    report.set_worker_id(worker);
    report.set_incarnation(registry_->Get(worker)->incarnation());
    report.set_job_id(job.id());
    report.set_attempt(attempt);
    report.set_rank(rank);
    report.mutable_metrics()->set_step(step);
    report.mutable_metrics()->set_checkpoint_step(checkpoint_step);
    return manager_->OnMetrics(report);
  }

  // Starts a restartable job on w0..w3, kills w3 and lets the second attempt
  // start on w0, w1, w2 and the spare w4, in rank order.
  Job StartSecondAttempt() {
    Job job = StartRunningJob(RestartableManifest(1));
    AddWorkers(1);
    PassHeartbeatTimeout("w3");
    EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_RUNNING);
    EXPECT_EQ(registry_->Get("w4")->rank(), 3);
    return job;
  }

  // Moves the clock past the heartbeat timeout, every live worker but
  // `dead` heartbeating (so `dead`, if any, dies), then ticks.
  void PassHeartbeatTimeout(const std::string& dead = "") {
    now_ += absl::Seconds(4);
    for (const auto& worker : registry_->List()) {
      if (worker.worker_id() != dead &&
          worker.state() != chimera::v1::WORKER_STATE_DEAD) {
        ASSERT_TRUE(
            registry_->Heartbeat(worker.worker_id(), worker.incarnation()).ok());
      }
    }
    manager_->Tick();
  }

  // Rank 2 of `job` hangs until its run is lost, or straggles (below).
  void HangRankTwo(const Job& job);
  void ReportStepsWithRankTwoSlow(const Job& job, int first, int end);

  chimera::v1::JobState StateOf(const Job& job) {
    return manager_->Get(job.id())->status().state();
  }

  Job MustSubmit(const chimera::v1::TrainJob& manifest) {
    absl::StatusOr<Job> job = manager_->Submit(manifest);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : Job{};
  }

  // Submits a 4-rank Chimera job on 4 fresh workers and completes the
  // rendezvous: every worker holds its start task afterwards.
  Job StartRunningJob(const chimera::v1::TrainJob& manifest = Manifest("run",
                                                                       4)) {
    AddWorkers(4);
    Job job = MustSubmit(manifest);
    manager_->Tick();
    EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_RUNNING);
    EXPECT_TRUE(Next("w0").has_value());
    EXPECT_TRUE(
        Report("w0", job, 0, chimera::v1::TASK_STATE_READY, "host:1234").ok());
    for (const char* w : {"w1", "w2", "w3"})
      EXPECT_TRUE(Next(w).has_value()) << w;
    return job;
  }

  absl::Time now_ = absl::FromUnixSeconds(1000);
  JobManagerOptions options_;
  std::unique_ptr<WorkerRegistry> registry_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<JobManager> manager_;
  int next_worker_ = 0;
};

TEST_F(JobManagerTest,
       MalformedSpecIsInvalidArgumentNamingTheFieldAndStoresNothing) {
  chimera::v1::TrainJob manifest = Manifest("bad", 4);
  manifest.mutable_spec()->mutable_model()->set_num_heads(3);
  absl::StatusOr<Job> job = manager_->Submit(manifest);
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(job.status().message(), HasSubstr("spec.model.hiddenSize"));
  EXPECT_TRUE(manager_->List(chimera::v1::JOB_STATE_UNSPECIFIED)->empty());
}

TEST_F(JobManagerTest, JobNeedingMoreWorkersThanCanExistIsFailedPrecondition) {
  absl::StatusOr<Job> job =
      manager_->Submit(Manifest("huge", 16, /*fixed=*/false));
  EXPECT_EQ(job.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(job.status().message(), HasSubstr("needs 16 workers"));
  EXPECT_TRUE(manager_->List(chimera::v1::JOB_STATE_UNSPECIFIED)->empty());
}

TEST_F(JobManagerTest, JobWaitsPendingUntilAllItsWorkersAreFree) {
  AddWorkers(3);
  Job job = MustSubmit(Manifest("wait", 4));
  manager_->Tick();
  EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_PENDING);
  AddWorkers(1);
  manager_->Tick();
  EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_RUNNING);
  EXPECT_EQ(manager_->Get(job.id())->plan().scheme(), "chimera");
}

TEST_F(JobManagerTest, RankZeroStartsFirstAndTheOthersGetItsStoreAddress) {
  AddWorkers(4);
  Job job = MustSubmit(Manifest("rdv", 4));
  manager_->Tick();
  std::optional<chimera::v1::Assignment> first = Next("w0");
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->start().rendezvous().store_address(), "");
  EXPECT_EQ(first->start().program().rank(), 0);
  // Layer ranges come from the plan's partition.
  const chimera::v1::Plan plan = manager_->Get(job.id())->plan();
  for (const auto& replica : first->start().program().stages()) {
    const chimera::v1::StageRange& range = plan.partition(replica.stage());
    EXPECT_EQ(replica.first_layer(), range.first_layer());
    EXPECT_EQ(replica.num_layers(), range.num_layers());
  }
  EXPECT_FALSE(Next("w1").has_value());
  ASSERT_TRUE(
      Report("w0", job, 0, chimera::v1::TASK_STATE_READY, "host:1234").ok());
  std::optional<chimera::v1::Assignment> other = Next("w3");
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->start().rendezvous().store_address(), "host:1234");
  EXPECT_EQ(other->start().program().rank(), 3);
}

// A rogue rank 0 could send every other rank to an address of its choosing:
// the store must be on the host its worker registered, or the job fails and
// no other rank learns the address.
TEST_F(JobManagerTest, RendezvousStoreOffTheReportingWorkersHostFailsTheJob) {
  AddWorkers(4);
  Job job = MustSubmit(Manifest("rogue", 4));
  manager_->Tick();
  ASSERT_TRUE(Next("w0").has_value());
  const absl::Status rogue =
      Report("w0", job, 0, chimera::v1::TASK_STATE_READY, "attacker.example:1234");
  EXPECT_EQ(rogue.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(rogue.message(),
              HasSubstr("rank 0 on worker w0 reported its rendezvous store at "
                        "'attacker.example:1234', not on the host it registered ('host')"));
  EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_FAILED);
  for (const char* w : {"w1", "w2", "w3"}) {
    const std::optional<chimera::v1::Assignment> next = Next(w);
    EXPECT_TRUE(!next.has_value() || !next->has_start()) << w;
  }
}

TEST_F(JobManagerTest, GpuJobsRunOnGpuWorkersAndThePlanNamesTheirGpus) {
  AddWorkers(2);  // CPU only: never chosen for a gpu job
  chimera::v1::TrainJob manifest = Manifest("gpu", 2);
  manifest.mutable_spec()->mutable_resources()->set_device("gpu");
  Job job = MustSubmit(manifest);
  manager_->Tick();
  EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_PENDING);
  AddWorkers(2, /*gpu=*/true);  // w2 on gpu 2, w3 on gpu 3
  manager_->Tick();
  EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_RUNNING);
  std::optional<chimera::v1::Assignment> first = Next("w2");
  ASSERT_TRUE(first.has_value());
  const chimera::v1::Plan& plan = first->start().plan();
  ASSERT_EQ(plan.placement_size(), 2);
  EXPECT_EQ(plan.placement(0).device(), 2);
  EXPECT_EQ(plan.placement(1).device(), 3);
  EXPECT_FALSE(Next("w0").has_value());
}

TEST_F(JobManagerTest, StepSummariesArriveOnceEveryRankReported) {
  Job job = StartRunningJob();
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(manager_->Steps(job.id())->size(), 0u);
    chimera::v1::ReportMetricsRequest report = StepReport(job, rank, 0);
    // Chimera: the last stages of both pipelines sit on ranks 0 and 3.
    report.mutable_metrics()->set_loss(rank == 0 || rank == 3 ? 1.5 : 0);
    report.mutable_metrics()->set_step_seconds(2.0);
    report.mutable_metrics()->set_bubble_seconds(0.5);
    report.mutable_metrics()->set_peak_memory_bytes(1000 * (rank + 1));
    ASSERT_TRUE(manager_->OnMetrics(report).ok());
  }
  auto steps = manager_->Steps(job.id());
  ASSERT_EQ(steps->size(), 1u);
  EXPECT_DOUBLE_EQ((*steps)[0].loss(), 3.0);
  EXPECT_DOUBLE_EQ((*steps)[0].bubble_ratio(), 0.25);
  EXPECT_DOUBLE_EQ((*steps)[0].samples_per_second(), 4.0);
  EXPECT_EQ((*steps)[0].peak_memory_bytes(), 4000);
  EXPECT_DOUBLE_EQ((*steps)[0].end_time(), absl::ToUnixSeconds(now_));
  Job stored = *manager_->Get(job.id());
  EXPECT_EQ(stored.status().completed_steps(), 1);
  EXPECT_EQ(stored.workers_size(), 4);
}

TEST_F(JobManagerTest, AReportOfSeveralStepsCountsEachInOrder) {
  Job job = StartRunningJob();
  for (int rank = 0; rank < 4; ++rank) {
    chimera::v1::ReportMetricsRequest report = StepReport(job, rank, 0);
    report.mutable_metrics()->set_loss(rank == 0 ? 3 : 0);
    chimera::v1::WorkerStepMetrics* later = report.add_later_metrics();
    later->set_step(1);
    later->set_loss(rank == 0 ? 2 : 0);
    ASSERT_TRUE(manager_->OnMetrics(report).ok());
  }
  auto steps = manager_->Steps(job.id());  // the job's two steps
  ASSERT_EQ(steps->size(), 2u);
  for (int step = 0; step < 2; ++step) {
    EXPECT_EQ((*steps)[step].step(), step);
    EXPECT_DOUBLE_EQ((*steps)[step].loss(), 3 - step);
  }
  EXPECT_EQ(manager_->Get(job.id())->status().completed_steps(), 2);
}

TEST_F(JobManagerTest, AReportOfSeveralStepsStopsAtTheFirstRefusedOne) {
  Job job = StartRunningJob();
  chimera::v1::ReportMetricsRequest report = StepReport(job, 0, 0);
  // The job runs 2 steps (0 and 1): step 5 is outside them.
  report.add_later_metrics()->set_step(5);
  report.add_later_metrics()->set_step(1);
  const absl::Status status = manager_->OnMetrics(report);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(),
              HasSubstr("5 is outside the job's steps [0, 2)"));
}

TEST_F(JobManagerTest, FixedPlanIsPredictedWhenItStarts) {
  Job job = StartRunningJob();
  ASSERT_EQ(manager_->Get(job.id())->plan().scheme(), "chimera");
  // A copy: a reference into the temporary StatusOr would dangle.
  const chimera::v1::Prediction prediction = manager_->Get(job.id())->plan().prediction();
  EXPECT_GT(prediction.iteration_seconds(), 0);
  EXPECT_GT(prediction.bubble_ratio(), 0);
}

TEST_F(JobManagerTest, KnobsTheJobLeavesOpenAreThePlannersChoice) {
  // Scheme, pipeline, data and micro-batches fixed; pipelines, concatenation,
  // recomputation and partition left open.
  AddWorkers(4);
  const chimera::v1::TrainJob manifest = Manifest("knobs", 4);
  absl::StatusOr<std::vector<chimera::v1::Plan>> best = manager_->Plans(manifest, 1);
  ASSERT_TRUE(best.ok()) << best.status();
  Job job = MustSubmit(manifest);
  manager_->Tick();
  const chimera::v1::Plan plan = manager_->Get(job.id())->plan();
  EXPECT_EQ(plan.scheme(), "chimera");
  EXPECT_EQ(plan.depth(), 4);
  EXPECT_EQ(plan.pipelines(), best->front().pipelines());
  // Four pipelines, where the engine's default is two.
  EXPECT_EQ(plan.pipelines(), 4);
  EXPECT_EQ(plan.recompute(), best->front().recompute());
  ASSERT_EQ(plan.partition_size(), best->front().partition_size());
  for (int s = 0; s < plan.partition_size(); ++s) {
    EXPECT_EQ(plan.partition(s).num_layers(), best->front().partition(s).num_layers()) << s;
  }
}

TEST_F(JobManagerTest, CpuWorkersThatSlowEachOtherDownArePlannedSlower) {
  AddWorkers(4);
  const chimera::v1::TrainJob manifest = Manifest("co-running", 4);
  absl::StatusOr<std::vector<chimera::v1::Plan>> alone = manager_->Plans(manifest, 1);
  ASSERT_TRUE(alone.ok()) << alone.status();
  options_.launch.cpu_co_running_slowdown = 0.5;
  RestartCoordinator();
  AddWorkers(4);
  absl::StatusOr<std::vector<chimera::v1::Plan>> slowed = manager_->Plans(manifest, 1);
  ASSERT_TRUE(slowed.ok()) << slowed.status();
  // Chimera's ranks compute at the same time for most of a step.
  EXPECT_GT(slowed->front().prediction().iteration_seconds(),
            1.1 * alone->front().prediction().iteration_seconds());
}

// `job`'s model as if measured on a CPU `slower` times slower than the
// analytic model's device.
chimera::v1::ModelProfile MeasuredProfile(const chimera::v1::TrainJob& job,
                                          double slower) {
  chimera::v1::DeviceSpec device;
  device.set_peak_flops(1e11);
  chimera::v1::ModelProfile profile =
      planner::AnalyticProfile(job.spec().model(), device);
  profile.set_source("measured");
  profile.set_device("cpu");
  for (auto& layer : *profile.mutable_layers()) {
    for (auto& timing : *layer.mutable_timings()) {
      timing.set_forward_seconds(slower * timing.forward_seconds());
      timing.set_backward_seconds(slower * timing.backward_seconds());
    }
  }
  return profile;
}

TEST_F(JobManagerTest, AJobSubmittedWithAProfileIsPlannedAndKeptWithIt) {
  AddWorkers(4);
  const chimera::v1::TrainJob manifest = Manifest("measured", 4);
  const Job analytic = MustSubmit(manifest);
  manager_->Tick();
  const double analytic_step =
      manager_->Get(analytic.id())->plan().prediction().iteration_seconds();
  ASSERT_TRUE(manager_->Stop(analytic.id()).ok());
  manager_->Tick();

  absl::StatusOr<Job> measured =
      manager_->Submit(manifest, MeasuredProfile(manifest, 10));
  ASSERT_TRUE(measured.ok()) << measured.status();
  manager_->Tick();
  EXPECT_GT(
      manager_->Get(measured->id())->plan().prediction().iteration_seconds(),
      5 * analytic_step);
  // The profile is the job's, also after a restart of the coordinator.
  RestartCoordinator();
  EXPECT_EQ(manager_->Get(measured->id())->profile().layers_size(), 8 + 2);
}

TEST_F(JobManagerTest, AProfileOfAnotherModelOrDeviceIsRefusedNamingTheField) {
  const chimera::v1::TrainJob manifest = Manifest("mismatch", 4);
  chimera::v1::TrainJob other = manifest;
  other.mutable_spec()->mutable_model()->set_num_layers(4);
  absl::StatusOr<Job> job =
      manager_->Submit(manifest, MeasuredProfile(other, 1));
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(job.status().message(),
              HasSubstr("profile.layers: has 4 blocks; the job's model has 8"));

  chimera::v1::ModelProfile gpu = MeasuredProfile(manifest, 1);
  gpu.set_device("cuda:0");
  job = manager_->Submit(manifest, gpu);
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(job.status().message(),
              HasSubstr("profile.device: 'cuda:0' is not a cpu device"));
  EXPECT_TRUE(manager_->List(chimera::v1::JOB_STATE_UNSPECIFIED)->empty());
}

TEST_F(JobManagerTest, RequestsAreServedWhileAJobsPlanIsSearched) {
  AddWorkers(8);
  // Many layers and everything left open: a search of a good fraction of a
  // second, where a request takes microseconds.
  chimera::v1::TrainJob manifest = Manifest("slow-to-plan", 8, /*fixed=*/false);
  manifest.mutable_spec()->mutable_model()->set_num_layers(96);
  manifest.mutable_spec()->mutable_training()->set_global_batch_size(64);
  Job job = MustSubmit(manifest);

  std::atomic<bool> ticking{true};
  std::thread tick([&] {
    manager_->Tick();
    ticking = false;
  });
  // Searched under the job manager's lock, the first request would wait for
  // the whole tick: a few dozen at most are served before the lock is taken,
  // tens of thousands while a search runs unlocked.
  int served_while_ticking = 0;
  while (ticking) {
    ASSERT_TRUE(manager_->List(chimera::v1::JOB_STATE_PENDING).ok());
    if (ticking) ++served_while_ticking;
  }
  tick.join();
  EXPECT_GT(served_while_ticking, 1000);
  EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_RUNNING);
}

TEST_F(JobManagerTest, AListPageStopsAtItsJobsOrBytesAndTheNextStartsAfterIt) {
  AddWorkers(2);
  std::vector<std::string> pending;
  Job running = MustSubmit(Manifest("runs", 2));
  manager_->Tick();
  ASSERT_EQ(StateOf(running), chimera::v1::JOB_STATE_RUNNING);
  for (int i = 0; i < 4; ++i) pending.push_back(MustSubmit(Manifest("waits", 2)).id());

  // Two pending jobs a page; the running one is skipped, not counted.
  absl::StatusOr<JobManager::JobPage> first =
      manager_->ListPage(chimera::v1::JOB_STATE_PENDING, 0, 2, int64_t{1} << 20);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->jobs.size(), 2u);
  EXPECT_EQ(first->jobs[0].id(), pending[0]);
  ASSERT_GT(first->next_after_seq, 0);
  absl::StatusOr<JobManager::JobPage> rest = manager_->ListPage(
      chimera::v1::JOB_STATE_PENDING, first->next_after_seq, 2, int64_t{1} << 20);
  ASSERT_TRUE(rest.ok()) << rest.status();
  ASSERT_EQ(rest->jobs.size(), 2u);
  EXPECT_EQ(rest->jobs[1].id(), pending[3]);
  EXPECT_EQ(rest->next_after_seq, 0);

  // One byte a page: each page still holds one job, so the listing ends.
  std::vector<std::string> one_by_one;
  int64_t after = 0;
  do {
    absl::StatusOr<JobManager::JobPage> page =
        manager_->ListPage(chimera::v1::JOB_STATE_UNSPECIFIED, after, 100, 1);
    ASSERT_TRUE(page.ok()) << page.status();
    ASSERT_EQ(page->jobs.size(), 1u);
    one_by_one.push_back(page->jobs[0].id());
    after = page->next_after_seq;
  } while (after > 0);
  EXPECT_EQ(one_by_one.size(), 5u);
  EXPECT_EQ(one_by_one[0], running.id());
}

TEST_F(JobManagerTest, WorkersLeftOpenAreEveryIdleWorkerTheFixedPipelineCanUse) {
  AddWorkers(5);
  chimera::v1::TrainJob manifest = Manifest("open", 0, /*fixed=*/false);
  manifest.mutable_spec()->mutable_parallelism()->set_pipeline(2);
  Job job = MustSubmit(manifest);
  manager_->Tick();
  ASSERT_EQ(StateOf(job), chimera::v1::JOB_STATE_RUNNING);
  const chimera::v1::Plan plan = manager_->Get(job.id())->plan();
  EXPECT_EQ(plan.depth(), 2);
  EXPECT_EQ(plan.width(), 2);
  EXPECT_EQ(registry_->IdleWorkers().size(), 1u);
}

TEST_F(JobManagerTest, PendingJobSaysHowManyWorkersItWaitsFor) {
  StartRunningJob();
  AddWorkers(2);
  Job waiting = MustSubmit(Manifest("waiting", 4));
  manager_->Tick();
  EXPECT_EQ(StateOf(waiting), chimera::v1::JOB_STATE_PENDING);
  EXPECT_EQ(manager_->Get(waiting.id())->status().message(),
            "waiting: needs 4 idle cpu workers (6 registered, 4 busy)");
  AddWorkers(1);
  manager_->Tick();
  EXPECT_THAT(manager_->Get(waiting.id())->status().message(),
              HasSubstr("(7 registered, 4 busy)"));
}

TEST_F(JobManagerTest, JobSucceedsWhenEveryRankDidAndWorkersGoIdle) {
  Job job = StartRunningJob();
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_RUNNING);
    ASSERT_TRUE(Report(absl::StrCat("w", rank), job, rank,
                       chimera::v1::TASK_STATE_SUCCEEDED)
                    .ok());
  }
  EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(registry_->IdleWorkers().size(), 4u);
}

TEST_F(JobManagerTest, FailedRankFailsTheJobNamingItAndStopsTheOthers) {
  Job job = StartRunningJob();
  ASSERT_TRUE(Report("w2", job, 2, chimera::v1::TASK_STATE_FAILED,
                     "recv from rank 1 timed out")
                  .ok());
  // Held back for a heartbeat timeout, in case a dead worker caused it.
  manager_->Tick();
  EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_RUNNING);
  now_ += absl::Seconds(3);
  for (const char* w : {"w0", "w1", "w2", "w3"}) {
    ASSERT_TRUE(registry_->Heartbeat(w, registry_->Get(w)->incarnation()).ok());
  }
  manager_->Tick();
  Job failed = *manager_->Get(job.id());
  EXPECT_EQ(failed.status().state(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_THAT(failed.status().message(),
              HasSubstr("rank 2 on worker w2 failed"));
  EXPECT_THAT(failed.status().message(),
              HasSubstr("recv from rank 1 timed out"));
  for (const char* w : {"w0", "w1", "w3"}) {
    std::optional<chimera::v1::Assignment> stop = Next(w);
    ASSERT_TRUE(stop.has_value()) << w;
    EXPECT_EQ(stop->stop().job_id(), job.id());
  }
  EXPECT_EQ(registry_->IdleWorkers().size(), 4u);
}

TEST_F(JobManagerTest, DeadWorkerFailsItsJobAndTheOthersTakeTheNextJob) {
  Job job = StartRunningJob();
  AddWorkers(0);
  now_ += absl::Seconds(4);
  for (const char* w : {"w0", "w1", "w2"}) {
    ASSERT_TRUE(registry_->Heartbeat(w, registry_->Get(w)->incarnation()).ok());
  }
  manager_->Tick();
  Job failed = *manager_->Get(job.id());
  EXPECT_EQ(failed.status().state(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_THAT(failed.status().message(), HasSubstr("worker w3 (rank 3)"));
  EXPECT_EQ(registry_->IdleWorkers().size(), 3u);
  for (const char* w : {"w0", "w1", "w2"})
    EXPECT_TRUE(Next(w)->has_stop()) << w;

  Job next = MustSubmit(Manifest("next", 2));
  manager_->Tick();
  EXPECT_EQ(StateOf(next), chimera::v1::JOB_STATE_RUNNING);
}

TEST_F(JobManagerTest, PeerFailuresAreBlamedOnTheWorkerThatDied) {
  Job job = StartRunningJob();
  // w3 is killed: its peers see the broken connection first.
  ASSERT_TRUE(Report("w1", job, 1, chimera::v1::TASK_STATE_FAILED,
                     "recv from rank 3: Connection closed by peer")
                  .ok());
  now_ += absl::Seconds(4);
  for (const char* w : {"w0", "w1", "w2"}) {
    ASSERT_TRUE(registry_->Heartbeat(w, registry_->Get(w)->incarnation()).ok());
  }
  manager_->Tick();
  Job failed = *manager_->Get(job.id());
  EXPECT_EQ(failed.status().state(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_THAT(failed.status().message(), HasSubstr("worker w3 (rank 3)"));
}

TEST_F(JobManagerTest, CheckpointCountsOnceEveryRankReportedWritingIt) {
  Job job = StartRunningJob(RestartableManifest(1));
  ReportStep(job, 0, 0);
  ReportStep(job, 1, 2, /*wrote=*/{0, 1, 2});
  EXPECT_EQ(manager_->Get(job.id())->status().checkpoint_step(), 0);
  ReportStep(job, 2, 0);
  ReportStep(job, 3, 4);
  ReportStep(job, 4, 0);
  Job stored = *manager_->Get(job.id());
  EXPECT_EQ(stored.status().checkpoint_step(), 4);
  EXPECT_EQ(stored.status().completed_steps(), 5);
}

TEST_F(JobManagerTest,
       DeadWorkerWithRestartsLeftRequeuesTheJobFromItsCheckpoint) {
  Job job = StartRunningJob(RestartableManifest(1));
  ReportStep(job, 0, 0);
  ReportStep(job, 1, 2);
  ReportStep(job, 2, 0);
  PassHeartbeatTimeout("w3");
  Job pending = *manager_->Get(job.id());
  EXPECT_EQ(pending.status().state(), chimera::v1::JOB_STATE_PENDING);
  EXPECT_EQ(pending.status().restarts(), 1);
  EXPECT_EQ(pending.status().checkpoint_step(), 2);
  EXPECT_EQ(pending.status().completed_steps(), 2);
  EXPECT_THAT(pending.status().message(), HasSubstr("worker w3 (rank 3)"));
  EXPECT_THAT(pending.status().message(),
              HasSubstr("restarting from its latest complete checkpoint "
                        "(step 2 or later) (restart 1 of 1)"));
  for (const char* w : {"w0", "w1", "w2"})
    EXPECT_TRUE(Next(w)->has_stop()) << w;
  EXPECT_EQ(registry_->IdleWorkers().size(), 3u);

  // A spare worker lets it run again: the next attempt, from step 2, with
  // the same plan.
  AddWorkers(1);
  manager_->Tick();
  Job running = *manager_->Get(job.id());
  EXPECT_EQ(running.status().state(), chimera::v1::JOB_STATE_RUNNING);
  EXPECT_EQ(running.plan().scheme(), "chimera");
  std::optional<chimera::v1::Assignment> start = Next("w0");
  ASSERT_TRUE(start.has_value());
  EXPECT_EQ(start->start().attempt(), 2);
  EXPECT_EQ(start->start().start_step(), 2);
  EXPECT_EQ(registry_->Get("w4")->job_id(), job.id());
}

TEST_F(JobManagerTest, JobWithoutCheckpointRestartsFromTheFirstStep) {
  Job job = StartRunningJob(RestartableManifest(1));
  ReportStep(job, 0, 0);
  AddWorkers(1);
  PassHeartbeatTimeout("w1");
  EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_RUNNING);
  EXPECT_EQ(manager_->Get(job.id())->status().completed_steps(), 0);
  std::optional<chimera::v1::Assignment> stop = Next("w0");
  ASSERT_TRUE(stop.has_value() && stop->has_stop());
  std::optional<chimera::v1::Assignment> start = Next("w0");
  ASSERT_TRUE(start.has_value() && start->has_start());
  EXPECT_EQ(start->start().start_step(), 0);
}

TEST_F(JobManagerTest, SecondDeadWorkerFailsTheJobOnceRestartsAreUsedUp) {
  Job job = StartRunningJob(RestartableManifest(1));
  AddWorkers(1);
  PassHeartbeatTimeout("w3");
  ASSERT_EQ(StateOf(job), chimera::v1::JOB_STATE_RUNNING);
  PassHeartbeatTimeout("w4");
  Job failed = *manager_->Get(job.id());
  EXPECT_EQ(failed.status().state(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_EQ(failed.status().restarts(), 1);
  EXPECT_THAT(failed.status().message(), HasSubstr("worker w4 (rank 3)"));
  EXPECT_EQ(registry_->IdleWorkers().size(), 3u);
}

TEST_F(JobManagerTest, RankFailingOnItsOwnFailsTheJobDespiteRestartsLeft) {
  Job job = StartRunningJob(RestartableManifest(1));
  ASSERT_TRUE(
      Report("w2", job, 2, chimera::v1::TASK_STATE_FAILED, "out of memory")
          .ok());
  PassHeartbeatTimeout();
  Job failed = *manager_->Get(job.id());
  EXPECT_EQ(failed.status().state(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_EQ(failed.status().restarts(), 0);
  EXPECT_THAT(failed.status().message(), HasSubstr("out of memory"));
}

// What w<rank> reports of its task of `attempt` of `job`.
chimera::v1::ReportTaskStateRequest TaskReport(const Job& job, int rank,
                                               int attempt,
                                               chimera::v1::TaskState state) {
  chimera::v1::ReportTaskStateRequest report;
  report.set_worker_id(absl::StrCat("w", rank));
  report.set_incarnation(100 + rank);
  report.set_job_id(job.id());
  report.set_attempt(attempt);
  report.set_rank(rank);
  report.set_state(state);
  return report;
}

// How a task of the first attempt on w<rank> failed, as its daemon reports.
chimera::v1::ReportTaskStateRequest Failure(const Job& job, int rank,
                                            const std::string& message,
                                            bool retryable) {
  chimera::v1::ReportTaskStateRequest report =
      TaskReport(job, rank, 1, chimera::v1::TASK_STATE_FAILED);
  report.set_message(message);
  report.set_retryable(retryable);
  return report;
}

TEST_F(JobManagerTest, AKilledTaskRestartsTheJobWhileRestartsAreLeft) {
  Job job = StartRunningJob(RestartableManifest(1));
  ASSERT_TRUE(manager_
                  ->OnTaskState(Failure(
                      job, 2, "task process killed by signal 9 (SIGKILL)", true))
                  .ok());
  ASSERT_TRUE(manager_
                  ->OnTaskState(Failure(
                      job, 1, "recv from rank 2: Connection closed", true))
                  .ok());
  PassHeartbeatTimeout();
  // Restarted at once on the same four workers, all of them idle again.
  const Job restarted = *manager_->Get(job.id());
  EXPECT_EQ(restarted.status().state(), chimera::v1::JOB_STATE_RUNNING);
  EXPECT_EQ(restarted.status().restarts(), 1);
  std::optional<chimera::v1::Assignment> stop = Next("w0");
  ASSERT_TRUE(stop.has_value() && stop->has_stop());
  std::optional<chimera::v1::Assignment> start = Next("w0");
  ASSERT_TRUE(start.has_value() && start->has_start());
  EXPECT_EQ(start->start().attempt(), 2);

  // Once the restarts are used up, the same failure fails the job, by name.
  chimera::v1::ReportTaskStateRequest again =
      Failure(job, 0, "task process killed by signal 9 (SIGKILL)", true);
  again.set_attempt(2);
  ASSERT_TRUE(manager_->OnTaskState(again).ok());
  PassHeartbeatTimeout();
  const Job failed = *manager_->Get(job.id());
  EXPECT_EQ(failed.status().state(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_THAT(failed.status().message(),
              HasSubstr("rank 0 on worker w0 failed: task process killed by "
                        "signal 9 (SIGKILL)"));
}

TEST_F(JobManagerTest, ARanksOwnErrorFailsTheJobThoughItsPeersFailedRetryably) {
  Job job = StartRunningJob(RestartableManifest(1));
  ASSERT_TRUE(manager_
                  ->OnTaskState(Failure(
                      job, 1, "recv from rank 2: Connection closed", true))
                  .ok());
  ASSERT_TRUE(
      manager_->OnTaskState(Failure(job, 2, "data file is binary", false)).ok());
  ASSERT_TRUE(manager_
                  ->OnTaskState(Failure(
                      job, 3, "recv from rank 2: Connection closed", true))
                  .ok());
  PassHeartbeatTimeout();
  Job failed = *manager_->Get(job.id());
  EXPECT_EQ(failed.status().state(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_EQ(failed.status().restarts(), 0);
  EXPECT_THAT(failed.status().message(),
              HasSubstr("rank 2 on worker w2 failed: data file is binary"));
}

// A coordinator that stood still longer than any timeout (SIGSTOP, a paused
// VM) blames nobody for the silence: no worker is dead, no rank stalled.
TEST_F(JobManagerTest, AStalledCoordinatorBlamesNoWorkerAndNoRankForItsSilence) {
  Job job = StartRunningJob(RestartableManifest(0));
  ReportStep(job, 0, 0);
  now_ += options_.progress_timeout + absl::Seconds(10);
  manager_->ExcuseStall(options_.progress_timeout + absl::Seconds(10));
  manager_->Tick();
  EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_RUNNING);
  for (const char* w : {"w0", "w1", "w2", "w3"}) {
    EXPECT_EQ(registry_->Get(w)->state(), chimera::v1::WORKER_STATE_BUSY) << w;
  }
  // Silence after the stall still counts.
  PassHeartbeatTimeout("w3");
  EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_FAILED);
}

TEST_F(JobManagerTest, TheNextAttemptStartsWhereRankZeroFoundTheLatestCheckpoint) {
  Job job = StartSecondAttempt();
  ASSERT_EQ(manager_->Get(job.id())->status().checkpoint_step(), 0);
  ASSERT_TRUE(Next("w0").has_value());
  chimera::v1::ReportTaskStateRequest ready =
      TaskReport(job, 0, 2, chimera::v1::TASK_STATE_READY);
  ready.set_store_address("host:1234");
  ready.set_first_step(11);
  EXPECT_EQ(manager_->OnTaskState(ready).code(),
            absl::StatusCode::kInvalidArgument)
      << "a step past the job's 10";
  ready.set_first_step(8);
  ASSERT_TRUE(manager_->OnTaskState(ready).ok());
  const Job resumed = *manager_->Get(job.id());
  EXPECT_EQ(resumed.status().checkpoint_step(), 8);
  EXPECT_EQ(resumed.status().completed_steps(), 8);
}

TEST_F(JobManagerTest, StoppingARunningJobStopsItsWorkersOnce) {
  Job job = StartRunningJob();
  absl::StatusOr<Job> stopped = manager_->Stop(job.id());
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(stopped->status().state(), chimera::v1::JOB_STATE_STOPPED);
  for (const char* w : {"w0", "w1", "w2", "w3"})
    EXPECT_TRUE(Next(w)->has_stop()) << w;
  EXPECT_EQ(manager_->Stop(job.id()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(registry_->IdleWorkers().size(), 4u);
}

TEST_F(JobManagerTest, StoppingAPendingJobNeverStartsIt) {
  Job job = MustSubmit(Manifest("later", 4));
  ASSERT_TRUE(manager_->Stop(job.id()).ok());
  AddWorkers(4);
  manager_->Tick();
  EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_STOPPED);
  EXPECT_EQ(registry_->IdleWorkers().size(), 4u);
}

TEST_F(JobManagerTest, OnlyEndedJobsCanBeDeleted) {
  Job job = StartRunningJob();
  EXPECT_EQ(manager_->Delete(job.id()).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(manager_->Stop(job.id()).ok());
  ASSERT_TRUE(manager_->Delete(job.id()).ok());
  EXPECT_EQ(manager_->Get(job.id()).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(JobManagerTest, QueueIsFirstInFirstOut) {
  AddWorkers(3);
  Job big = MustSubmit(Manifest("big", 4));
  Job small = MustSubmit(Manifest("small", 2));
  manager_->Tick();
  EXPECT_EQ(StateOf(big), chimera::v1::JOB_STATE_PENDING);
  EXPECT_EQ(StateOf(small), chimera::v1::JOB_STATE_PENDING);
}

TEST_F(JobManagerTest, StaleReportsAreRejected) {
  Job job = StartRunningJob();
  chimera::v1::ReportTaskStateRequest report;
  report.set_worker_id("w1");
  report.set_incarnation(999);
  report.set_job_id(job.id());
  report.set_attempt(1);
  report.set_rank(1);
  report.set_state(chimera::v1::TASK_STATE_SUCCEEDED);
  EXPECT_EQ(manager_->OnTaskState(report).code(), absl::StatusCode::kAborted);
  report.set_incarnation(101);
  report.set_attempt(7);
  EXPECT_EQ(manager_->OnTaskState(report).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_RUNNING);
}

TEST_F(JobManagerTest, MetricsOfAReplacedAttemptAreIgnored) {
  Job job = StartSecondAttempt();
  // w0 holds rank 0 again; its first attempt's task reports late.
  EXPECT_EQ(ReportMetrics("w0", job, /*attempt=*/1, 0, 0).code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(ReportMetrics("w1", job, 2, 1, 0).ok());
  ASSERT_TRUE(ReportMetrics("w2", job, 2, 2, 0).ok());
  ASSERT_TRUE(ReportMetrics("w4", job, 2, 3, 0).ok());
  EXPECT_TRUE(manager_->Steps(job.id())->empty())
      << "the stale report must not stand in for rank 0";
  ASSERT_TRUE(ReportMetrics("w0", job, 2, 0, 0).ok());
  EXPECT_EQ(manager_->Steps(job.id())->size(), 1u);
}

TEST_F(JobManagerTest, MetricsWithoutAnAttemptCountForTheCurrentOne) {
  Job job = StartSecondAttempt();
  ASSERT_TRUE(ReportMetrics("w0", job, /*attempt=*/0, 0, 0).ok());
  ASSERT_TRUE(ReportMetrics("w1", job, 0, 1, 0).ok());
  ASSERT_TRUE(ReportMetrics("w2", job, 0, 2, 0).ok());
  ASSERT_TRUE(ReportMetrics("w4", job, 0, 3, 0).ok());
  EXPECT_EQ(manager_->Steps(job.id())->size(), 1u);
  EXPECT_EQ(ReportMetrics("w1", job, 0, /*rank=*/0, 1).code(),
            absl::StatusCode::kNotFound)
      << "rank and worker are still checked";
}

TEST_F(JobManagerTest, OpenParallelismIsPlannedForTheWorkersItGets) {
  AddWorkers(4);
  Job job = MustSubmit(Manifest("auto", 4, /*fixed=*/false));
  EXPECT_EQ(job.plan().scheme(), "");
  manager_->Tick();
  Job running = *manager_->Get(job.id());
  EXPECT_EQ(running.status().state(), chimera::v1::JOB_STATE_RUNNING);
  EXPECT_FALSE(running.plan().scheme().empty());
  EXPECT_EQ(running.plan().width() * running.plan().depth(), 4);
}

TEST_F(JobManagerTest, RestartedCoordinatorTakesBackAJobWhoseRanksAllReturn) {
  Job job = StartRunningJob();
  ReportStep(job, 0, 0);
  Job waiting = MustSubmit(Manifest("queued", 8));
  RestartCoordinator();
  EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_RUNNING);
  EXPECT_EQ(StateOf(waiting), chimera::v1::JOB_STATE_PENDING);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_TRUE(RegisterAgainHolding(rank, job, rank,
                                     chimera::v1::TASK_STATE_RUNNING));
    EXPECT_EQ(registry_->Get(absl::StrCat("w", rank))->rank(), rank);
  }
  ReportStep(job, 1, 0);
  EXPECT_EQ(manager_->Get(job.id())->status().completed_steps(), 2);
  // Long after the readoption timeout it still runs, as the first attempt.
  PassHeartbeatTimeout();
  PassHeartbeatTimeout();
  PassHeartbeatTimeout();
  PassHeartbeatTimeout();
  EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_RUNNING);
  EXPECT_EQ(manager_->Get(job.id())->status().restarts(), 0);
  for (int rank = 0; rank < 4; ++rank) {
    ASSERT_TRUE(Report(absl::StrCat("w", rank), job, rank,
                       chimera::v1::TASK_STATE_SUCCEEDED)
                    .ok());
  }
  EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_SUCCEEDED);
}

TEST_F(JobManagerTest, RestartedCoordinatorRefusesTasksItDoesNotWaitFor) {
  Job job = StartRunningJob();
  AddWorkers(1);
  RestartCoordinator();
  EXPECT_FALSE(RegisterAgainHolding(0, job, 0, chimera::v1::TASK_STATE_RUNNING,
                                    /*attempt=*/2))
      << "another attempt";
  EXPECT_FALSE(RegisterAgainHolding(1, job, 4, chimera::v1::TASK_STATE_RUNNING))
      << "a rank the job does not have";
  EXPECT_TRUE(RegisterAgainHolding(2, job, 2, chimera::v1::TASK_STATE_RUNNING));
  EXPECT_FALSE(RegisterAgainHolding(4, job, 2, chimera::v1::TASK_STATE_RUNNING))
      << "a rank another worker holds";
  Job other = job;
  other.set_id("unknown-00000000");
  EXPECT_FALSE(RegisterAgainHolding(3, other, 3, chimera::v1::TASK_STATE_RUNNING))
      << "a job that is not running";
  EXPECT_EQ(registry_->Get("w4")->state(), chimera::v1::WORKER_STATE_IDLE);
}

TEST_F(JobManagerTest, RankThatSucceededWhileTheCoordinatorWasAwayCounts) {
  Job job = StartRunningJob();
  RestartCoordinator();
  EXPECT_FALSE(
      RegisterAgainHolding(3, job, 3, chimera::v1::TASK_STATE_SUCCEEDED))
      << "an ended task is not kept";
  EXPECT_EQ(registry_->Get("w3")->state(), chimera::v1::WORKER_STATE_IDLE);
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_TRUE(RegisterAgainHolding(rank, job, rank,
                                     chimera::v1::TASK_STATE_RUNNING));
    ASSERT_TRUE(Report(absl::StrCat("w", rank), job, rank,
                       chimera::v1::TASK_STATE_SUCCEEDED)
                    .ok());
  }
  const Job done = *manager_->Get(job.id());
  EXPECT_EQ(done.status().state(), chimera::v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(done.status().completed_steps(),
            done.manifest().spec().training().max_steps())
      << "steps whose reports were lost in the restart ran too";
}

TEST_F(JobManagerTest, RestartFailsAJobWhoseRanksDoNotComeBackNamingThem) {
  Job job = StartRunningJob();
  RestartCoordinator();
  EXPECT_TRUE(RegisterAgainHolding(0, job, 0, chimera::v1::TASK_STATE_RUNNING));
  EXPECT_TRUE(RegisterAgainHolding(1, job, 1, chimera::v1::TASK_STATE_RUNNING));
  PassHeartbeatTimeout();
  EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_RUNNING)
      << "still within the readoption timeout";
  for (int i = 0; i < 3; ++i) PassHeartbeatTimeout();  // 16 s after the restart
  const Job failed = *manager_->Get(job.id());
  EXPECT_EQ(failed.status().state(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_THAT(failed.status().message(),
              HasSubstr("the coordinator restarted and the workers of ranks 2, "
                        "3 did not register again within 15s"));
  std::optional<chimera::v1::Assignment> stop = Next("w0");
  ASSERT_TRUE(stop.has_value());
  EXPECT_TRUE(stop->has_stop());
  EXPECT_EQ(registry_->Get("w0")->state(), chimera::v1::WORKER_STATE_IDLE);
}

TEST_F(JobManagerTest,
       RestartRequeuesAJobWithRestartsLeftFromItsCheckpointIfARankIsGone) {
  Job job = StartRunningJob(RestartableManifest(1));
  ReportStep(job, 0, 0);
  ReportStep(job, 1, 2);
  RestartCoordinator();
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_TRUE(RegisterAgainHolding(rank, job, rank,
                                     chimera::v1::TASK_STATE_RUNNING));
  }
  for (int i = 0; i < 4; ++i) PassHeartbeatTimeout();  // 16 s after the restart
  Job pending = *manager_->Get(job.id());
  EXPECT_EQ(pending.status().state(), chimera::v1::JOB_STATE_PENDING);
  EXPECT_EQ(pending.status().restarts(), 1);
  EXPECT_EQ(pending.status().completed_steps(), 2);
  EXPECT_THAT(pending.status().message(),
              HasSubstr("the coordinator restarted and the worker of rank 3 "
                        "did not register again within 15s; restarting from "
                        "its latest complete checkpoint (step 2 or later) "
                        "(restart 1 of 1)"));
}

TEST_F(JobManagerTest, RestartedJobWithOpenParallelismIsPlannedAgain) {
  chimera::v1::TrainJob manifest = Manifest("auto", 4, /*fixed=*/false);
  manifest.mutable_spec()->mutable_run_policy()->set_backoff_limit(1);
  Job job = StartRunningJob(manifest);
  ASSERT_FALSE(manager_->Get(job.id())->plan().scheme().empty());
  PassHeartbeatTimeout("w2");
  Job pending = *manager_->Get(job.id());
  EXPECT_EQ(pending.status().state(), chimera::v1::JOB_STATE_PENDING);
  EXPECT_EQ(pending.plan().scheme(), "") << "the old plan is dropped";

  AddWorkers(1);
  manager_->Tick();
  Job running = *manager_->Get(job.id());
  EXPECT_EQ(running.status().state(), chimera::v1::JOB_STATE_RUNNING);
  EXPECT_EQ(running.plan().width() * running.plan().depth(), 4);
}

// The restartable job, allowed to go on with `min_workers` of its 4.
chimera::v1::TrainJob ElasticManifest(int min_workers) {
  chimera::v1::TrainJob job = RestartableManifest(2);
  job.mutable_spec()->mutable_resources()->set_min_workers(min_workers);
  return job;
}

// The elastic job with its parallelism left open, on devices slow enough
// that compute, not the links, decides its plans' speed: more workers are
// predicted faster.
chimera::v1::TrainJob GrowableManifest() {
  chimera::v1::TrainJob job = ElasticManifest(2);
  job.mutable_spec()->clear_parallelism();
  return job;
}

TEST_F(JobManagerTest,
       AJobThatMayShrinkGoesOnWithTheWorkersLeftReplannedForThem) {
  Job job = StartRunningJob(ElasticManifest(2));
  PassHeartbeatTimeout("w2");
  const Job running = *manager_->Get(job.id());
  ASSERT_EQ(running.status().state(), chimera::v1::JOB_STATE_RUNNING)
      << running.status().message();
  EXPECT_EQ(running.status().restarts(), 1);
  const chimera::v1::Plan& plan = running.plan();
  EXPECT_EQ(plan.width() * plan.depth(), 3) << plan.ShortDebugString();
  EXPECT_NE(plan.scheme(), "chimera") << "its fixed D = 4 was for 4 workers";
  EXPECT_EQ(plan.width() * plan.micro_batches() * plan.micro_batch_size(), 8)
      << "the global batch stays";
  EXPECT_EQ(running.manifest().SerializeAsString(),
            ElasticManifest(2).SerializeAsString())
      << "the job asks for what it asked for";
  std::optional<chimera::v1::Assignment> stop = Next("w0");
  ASSERT_TRUE(stop.has_value() && stop->has_stop());
  std::optional<chimera::v1::Assignment> start = Next("w0");
  ASSERT_TRUE(start.has_value() && start->has_start());
  EXPECT_EQ(start->start().plan().placement_size(), 3);
  EXPECT_EQ(manager_->Recoveries().by_cause.at(RecoveryCause::kWorkerLost), 1);
  EXPECT_EQ(manager_->Recoveries().observed, 0) << "not training yet";
}

TEST_F(JobManagerTest, AJobThatMayNotShrinkWaitsForAsManyWorkersAsItAsks) {
  Job job = StartRunningJob(ElasticManifest(4));
  PassHeartbeatTimeout("w2");
  const Job pending = *manager_->Get(job.id());
  EXPECT_EQ(pending.status().state(), chimera::v1::JOB_STATE_PENDING);
  EXPECT_THAT(pending.status().waiting_for(),
              HasSubstr("needs 4 idle cpu workers"));
}

TEST_F(JobManagerTest,
       AJobLeftWithFewerWorkersThanItsMinimumFailsNamingWhatItLost) {
  UseOptions([](JobManagerOptions& options) {
    options.readopt_timeout = absl::Seconds(1);
  });
  Job job = StartRunningJob(ElasticManifest(3));
  PassHeartbeatTimeout("w1");
  ASSERT_EQ(StateOf(job), chimera::v1::JOB_STATE_RUNNING);
  PassHeartbeatTimeout("w2");
  const Job failed = *manager_->Get(job.id());
  EXPECT_EQ(failed.status().state(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_THAT(failed.status().message(), HasSubstr("worker w2 (rank "));
  EXPECT_THAT(
      failed.status().message(),
      HasSubstr("2 cpu workers are left and spec.resources.minWorkers is 3"));
  EXPECT_EQ(registry_->IdleWorkers().size(), 2u);
}

// Tests of growing back, on devices slow enough that more workers are
// predicted faster.
class JobGrowthTest : public JobManagerTest {
 protected:
  void SetUp() override {
    JobManagerTest::SetUp();
    UseOptions([](JobManagerOptions& options) {
      options.launch.device_peak_flops = 1e8;
    });
  }

  // Starts `manifest` on w0..w3 and loses w2: the job goes on with w0, w1
  // and w3 (ranks 0, 1, 2 of its second attempt), past its rendezvous. Then
  // w4 registers, and a tick judges whether the job should grow to it.
  Job ShrunkWithAWorkerIdle(const chimera::v1::TrainJob& manifest) {
    Job job = StartRunningJob(manifest);
    PassHeartbeatTimeout("w2");
    EXPECT_EQ(manager_->Get(job.id())->plan().placement_size(), 3);
    chimera::v1::ReportTaskStateRequest ready =
        TaskReport(job, 0, 2, chimera::v1::TASK_STATE_READY);
    ready.set_store_address("host:1234");
    EXPECT_TRUE(manager_->OnTaskState(ready).ok());
    AddWorkers(1);
    manager_->Tick();
    return job;
  }

  // Every rank of the shrunk run reports `step` having written
  // `checkpoint_step` (0: none).
  void ReportShrunkStep(const Job& job, int step, int checkpoint_step) {
    const std::vector<std::string> workers = {"w0", "w1", "w3"};
    for (int rank = 0; rank < 3; ++rank) {
      ASSERT_TRUE(
          ReportMetrics(workers[rank], job, 2, rank, step, checkpoint_step)
              .ok());
    }
  }
};

TEST_F(JobGrowthTest,
       AShrunkJobGrowsBackAtItsNextCheckpointWithoutCountingARestart) {
  Job job = ShrunkWithAWorkerIdle(GrowableManifest());
  ReportShrunkStep(job, 0, 0);
  EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_RUNNING)
      << "it grows at a checkpoint, not before";
  ReportShrunkStep(job, 1, 2);
  const Job queued = *manager_->Get(job.id());
  EXPECT_EQ(manager_->Recoveries().by_cause.at(RecoveryCause::kGrow), 1);
  // The shrink's recovery ended with the shrunk run's first step.
  EXPECT_EQ(manager_->Recoveries().observed, 1);
  EXPECT_EQ(queued.status().restarts(), 1) << "a growth is no restart";
  EXPECT_EQ(queued.status().completed_steps(), 2);
  EXPECT_THAT(queued.status().restart_cause(),
              HasSubstr("growing from 3 to 4 workers"));
  EXPECT_THAT(queued.status().restart_cause(), HasSubstr("at step 2"));

  manager_->Tick();
  const Job grown = *manager_->Get(job.id());
  ASSERT_EQ(grown.status().state(), chimera::v1::JOB_STATE_RUNNING)
      << grown.status().message();
  EXPECT_EQ(grown.plan().placement_size(), 4);
  EXPECT_EQ(grown.status().attempt(), 3);
  EXPECT_TRUE(absl::IsNotFound(ReportMetrics("w0", job, 2, 0, 2)))
      << "the shrunk run's reports no longer count";
}

TEST_F(JobGrowthTest,
       AShrunkJobStaysWhenMoreWorkersAreNotPredictedFasterEnough) {
  chimera::v1::TrainJob manifest = GrowableManifest();
  manifest.mutable_spec()->mutable_run_policy()->set_grow_threshold(10);
  Job job = ShrunkWithAWorkerIdle(manifest);
  ReportShrunkStep(job, 1, 2);
  const Job running = *manager_->Get(job.id());
  EXPECT_EQ(running.status().state(), chimera::v1::JOB_STATE_RUNNING);
  EXPECT_EQ(running.plan().placement_size(), 3);
  EXPECT_EQ(running.status().attempt(), 2);
}

TEST_F(JobManagerTest, MissingRendezvousFailsTheJob) {
  JobManagerOptions options;
  options.rendezvous_timeout = absl::ZeroDuration();
  options.plan_wait = absl::InfiniteDuration();
  JobManager impatient(store_.get(), registry_.get(), options,
                       Clock::Fake([this] { return now_; }));
  AddWorkers(2);
  absl::StatusOr<Job> job = impatient.Submit(Manifest("rdv", 2));
  ASSERT_TRUE(job.ok());
  impatient.Tick();
  now_ += absl::Milliseconds(100);
  impatient.Tick();
  Job failed = *impatient.Get(job->id());
  EXPECT_EQ(failed.status().state(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_THAT(failed.status().message(), HasSubstr("rendezvous store"));
}

TEST_F(JobManagerTest,
       ActiveDeadlineFailsAJobThatRunsPastItEvenAcrossRestarts) {
  chimera::v1::TrainJob manifest = RestartableManifest(1);
  manifest.mutable_spec()->mutable_run_policy()->set_active_deadline_seconds(
      10);
  Job job = StartRunningJob(manifest);
  const double first_start = manager_->Get(job.id())->status().start_time();
  AddWorkers(1);
  PassHeartbeatTimeout("w1");  // 4 s: restarted on the spare worker
  ASSERT_EQ(StateOf(job), chimera::v1::JOB_STATE_RUNNING);
  EXPECT_EQ(manager_->Get(job.id())->status().restarts(), 1);
  EXPECT_EQ(manager_->Get(job.id())->status().start_time(), first_start);
  PassHeartbeatTimeout();  // 8 s
  EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_RUNNING);
  PassHeartbeatTimeout();  // 12 s
  Job failed = *manager_->Get(job.id());
  EXPECT_EQ(failed.status().state(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_THAT(failed.status().message(),
              HasSubstr("still running 10 s after its start, its "
                        "spec.runPolicy.activeDeadlineSeconds"));
}

// A stopped rank (SIGSTOP, a stuck collective) is found by its silence,
// within the progress timeout, and named: before, only a peer's receive
// timeout (minutes) ended the job, blaming the waiting peer.
TEST_F(JobManagerTest, ARankThatStopsReportingFailsTheJobNamingIt) {
  chimera::v1::TrainJob manifest = Manifest("stall", 4);
  manifest.mutable_spec()->mutable_training()->set_max_steps(100);
  Job job = StartRunningJob(manifest);
  // 4 s a round while the other ranks report: 15 rounds reach the 60 s
  // timeout, one more passes it.
  for (int round = 0; round < 15; ++round) {
    PassHeartbeatTimeout();
    for (int rank : {0, 1, 3}) {
      const absl::Status reported = ReportMetrics(absl::StrCat("w", rank), job, 1, rank, round);
      ASSERT_TRUE(reported.ok()) << "round " << round << ": " << reported;
    }
  }
  ASSERT_EQ(StateOf(job), chimera::v1::JOB_STATE_RUNNING);
  PassHeartbeatTimeout();
  const Job failed = *manager_->Get(job.id());
  EXPECT_EQ(failed.status().state(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_THAT(failed.status().message(),
              HasSubstr("rank 2 on worker w2 reported no step for 1m"));
  EXPECT_THAT(failed.status().message(), Not(HasSubstr("rank 0")));
}

// Heartbeats 4 s apart until the progress timeout (60 s) passes: rank 2
// of `job`'s first attempt is in a forward of its own, the other ranks wait
// for it in receives.
void JobManagerTest::HangRankTwo(const Job& job) {
  for (int round = 0; round < 16; ++round) {
    now_ += absl::Seconds(4);
    for (int rank = 0; rank < 4; ++rank) {
      const std::string worker = absl::StrCat("w", rank);
      chimera::v1::TaskPosition position;
      position.set_job_id(job.id());
      position.set_attempt(1);
      position.set_rank(rank);
      position.set_op(rank == 2 ? "FORWARD chunk=0 stage=2 mb=1"
                                : "RECV_ACT chunk=0 stage=0 mb=1 peer=2");
      position.set_op_seconds(4 * round);
      position.set_waits_for_peer(rank != 2);
      ASSERT_TRUE(registry_
                      ->Heartbeat(worker, registry_->Get(worker)->incarnation(),
                                  position)
                      .ok());
    }
    manager_->Tick();
  }
}

// A hang is a lost worker like a dead one: the rank that holds the others
// up is named with its op, and the job goes on without its worker (idle
// and heartbeating as it is) on the workers left.
TEST_F(JobManagerTest, AHungRanksWorkerIsLeftOutAndTheJobGoesOnWithoutIt) {
  Job job = StartRunningJob(ElasticManifest(2));
  EXPECT_EQ(registry_->Get("w2")->task_position().op(), "")
      << "no position before a heartbeat says";
  HangRankTwo(job);
  const Job running = *manager_->Get(job.id());
  ASSERT_EQ(running.status().state(), chimera::v1::JOB_STATE_RUNNING);
  EXPECT_EQ(running.status().restarts(), 1);
  EXPECT_THAT(running.status().restart_cause(),
              HasSubstr("rank 2 on worker w2 (in FORWARD chunk=0 stage=2 "
                        "mb=1 of step 0 for 60.0 s)"));
  EXPECT_THAT(running.status().restart_cause(),
              HasSubstr("rank 0 on worker w0 (waiting in RECV_ACT"));
  EXPECT_THAT(running.status().restart_cause(),
              HasSubstr("the job leaves out worker w2 from now on"));
  ASSERT_EQ(running.status().left_out_workers_size(), 1);
  EXPECT_EQ(running.status().left_out_workers(0).worker_id(), "w2");
  EXPECT_EQ(running.plan().placement_size(), 3);
  EXPECT_EQ(registry_->Get("w2")->state(), chimera::v1::WORKER_STATE_IDLE);
  EXPECT_EQ(manager_->Recoveries().by_cause.at(RecoveryCause::kStalled), 1);
}

TEST_F(JobManagerTest, AJobThatMayNotShrinkWaitsNamingTheWorkerItLeftOut) {
  Job job = StartRunningJob(ElasticManifest(4));
  HangRankTwo(job);
  EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_PENDING);
  EXPECT_THAT(manager_->Get(job.id())->status().waiting_for(),
              HasSubstr("needs 4 idle cpu workers (4 registered, 0 busy, 1 "
                        "left out by this job)"));
  // A new incarnation of the worker (its daemon restarted) is a new chance.
  chimera::v1::RegisterWorkerRequest restarted = Registration(2);
  restarted.set_incarnation(200);
  ASSERT_TRUE(registry_->Register(restarted).ok());
  manager_->Tick();
  EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_RUNNING);
}

// Every rank of `job`'s first attempt reports steps [`first`, `end`), rank
// 2 computing 3x as long as the others.
void JobManagerTest::ReportStepsWithRankTwoSlow(const Job& job, int first,
                                                int end) {
  for (int step = first; step < end; ++step) {
    for (int rank = 0; rank < 4; ++rank) {
      chimera::v1::ReportMetricsRequest report = StepReport(job, rank, step);
      report.set_attempt(1);
      report.mutable_metrics()->set_busy_seconds(rank == 2 ? 0.3 : 0.1);
      ASSERT_TRUE(manager_->OnMetrics(report).ok()) << "step " << step;
    }
  }
}

TEST_F(JobManagerTest, AStragglingRankIsReportedAndTheJobGoesOn) {
  Job job = StartRunningJob(ElasticManifest(2));
  ReportStepsWithRankTwoSlow(job, 0, 4);
  EXPECT_EQ(manager_->Get(job.id())->status().stragglers_size(), 0)
      << "4 slow steps are not yet 5";
  ReportStepsWithRankTwoSlow(job, 4, 6);
  const Job running = *manager_->Get(job.id());
  ASSERT_EQ(running.status().stragglers_size(), 1);
  EXPECT_EQ(running.status().stragglers(0).rank(), 2);
  EXPECT_EQ(running.status().stragglers(0).worker_id(), "w2");
  EXPECT_EQ(running.status().stragglers(0).since_step(), 0);
  EXPECT_GT(running.status().stragglers(0).slowdown(), 2.5);
  EXPECT_EQ(running.status().restarts(), 0) << "reported, not replaced";
}

TEST_F(JobManagerTest,
       WithReplaceStragglersAStragglerIsLeftOutLikeALostWorker) {
  chimera::v1::TrainJob manifest = ElasticManifest(2);
  manifest.mutable_spec()->mutable_run_policy()->set_replace_stragglers(true);
  Job job = StartRunningJob(manifest);
  ReportStepsWithRankTwoSlow(job, 0, 5);
  EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_PENDING);
  manager_->Tick();
  const Job running = *manager_->Get(job.id());
  ASSERT_EQ(running.status().state(), chimera::v1::JOB_STATE_RUNNING);
  EXPECT_EQ(running.status().restarts(), 1);
  EXPECT_THAT(running.status().restart_cause(),
              HasSubstr("rank 2 on worker w2 straggles: its compute ran "));
  EXPECT_THAT(running.status().restart_cause(),
              HasSubstr("spec.runPolicy.replaceStragglers"));
  ASSERT_EQ(running.status().left_out_workers_size(), 1);
  EXPECT_EQ(running.status().left_out_workers(0).worker_id(), "w2");
  EXPECT_EQ(running.plan().placement_size(), 3);
  EXPECT_EQ(running.status().stragglers_size(), 0)
      << "a new run, judged afresh";
  EXPECT_EQ(manager_->Recoveries().by_cause.at(RecoveryCause::kStraggler), 1);
}

TEST_F(JobManagerTest, AStepOutsideTheJobsStepsIsRefused) {
  Job job = StartRunningJob();  // 2 steps
  for (int step : {-1, 2, 1000000}) {
    const absl::Status status = ReportMetrics("w0", job, 1, 0, step);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << step;
    EXPECT_THAT(status.message(), HasSubstr("is outside the job's steps [0, 2)"));
  }
  EXPECT_TRUE(ReportMetrics("w0", job, 1, 0, 1).ok());
}

// A full disk under --db: the job's end could not be written, and it showed
// RUNNING for ever with its workers idle. Now the end is kept, retried every
// tick and recorded once the store has room; until then the job shows what
// the store holds, every change is refused naming the end that waits, and a
// queued job waits instead of failing.
TEST_F(JobManagerTest, AnEndTheFullStoreRefusedIsRecordedOnceThereIsRoom) {
  Job job = StartRunningJob(Manifest("ends", 4));
  ASSERT_TRUE(store_->LimitSize(1).ok());  // No more room from here on.
  absl::Status full;
  for (int i = 0; i < 1000 && full.ok(); ++i) {
    full = manager_->Submit(Manifest(absl::StrCat("filler-", i), 4)).status();
  }
  ASSERT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  // A rank fails with a long message: recording the end needs room.
  ASSERT_TRUE(Report("w1", job, 1, chimera::v1::TASK_STATE_FAILED, std::string(8000, 'x')).ok());
  PassHeartbeatTimeout();  // The held-back failure is due.
  EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_RUNNING);
  EXPECT_EQ(store_->Get(job.id())->status().state(), chimera::v1::JOB_STATE_RUNNING);
  EXPECT_TRUE(manager_->List(chimera::v1::JOB_STATE_FAILED)->empty());
  for (const char* w : {"w0", "w1", "w2", "w3"}) {
    EXPECT_EQ(registry_->Get(w)->state(), chimera::v1::WORKER_STATE_IDLE) << w;
  }
  const absl::Status refused = manager_->Submit(Manifest("later", 4)).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(refused.message(),
              HasSubstr(absl::StrCat("has not recorded 1 job change that already "
                                     "happened (the first: job ", job.id(), " FAILED")));
  // A filler that found no room to record its start waits, queued: none
  // failed for want of room.
  const std::vector<Job> stored = *store_->List(chimera::v1::JOB_STATE_UNSPECIFIED);
  for (const Job& other : stored) {
    if (other.id() != job.id()) {
      EXPECT_NE(other.status().state(), chimera::v1::JOB_STATE_FAILED) << other.id();
    }
  }

  ASSERT_TRUE(store_->LimitSize(0).ok());
  PassHeartbeatTimeout();
  const Job recorded = *store_->Get(job.id());
  EXPECT_EQ(recorded.status().state(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_THAT(recorded.status().message(), HasSubstr("xxxx"));
  EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_FAILED);
  std::vector<Job> failed = *manager_->List(chimera::v1::JOB_STATE_FAILED);
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].id(), job.id());
  EXPECT_TRUE(manager_->Submit(Manifest("later", 4)).ok());
}

// A job fixing a plan that no variant of fits in its workers' memory was
// started anyway "with default knobs", for its workers to run out of memory.
// It fails before any worker hears of it, naming the memory.
chimera::v1::TrainJob TooLargeForItsWorkers() {
  chimera::v1::TrainJob huge = Manifest("huge", 4);
  huge.mutable_spec()->mutable_model()->set_hidden_size(16384);
  huge.mutable_spec()->mutable_model()->set_num_heads(128);
  huge.mutable_spec()->mutable_model()->set_num_layers(96);
  return huge;
}

TEST_F(JobManagerTest, AFixedPlanThatCannotFitIsRefusedAtSubmitOnTheWorkersKnown) {
  AddWorkers(4);
  const absl::StatusOr<Job> refused = manager_->Submit(TooLargeForItsWorkers());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("spec.parallelism: on the 4 registered cpu workers, "
                        "no plan fits in 8589934592 bytes"));
  EXPECT_TRUE(manager_->List(chimera::v1::JOB_STATE_UNSPECIFIED)->empty());
}

TEST_F(JobManagerTest, AFixedPlanThatCannotFitFailsAtStartNamingTheMemory) {
  // Submitted before its workers registered: only its start can tell.
  Job job = MustSubmit(TooLargeForItsWorkers());
  AddWorkers(4);
  manager_->Tick();
  const Job failed = *manager_->Get(job.id());
  EXPECT_EQ(failed.status().state(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_THAT(failed.status().message(),
              HasSubstr("could not start: no plan fits in 8589934592 bytes"));
  for (const char* w : {"w0", "w1", "w2", "w3"}) {
    EXPECT_FALSE(Next(w).has_value()) << w;
  }
}

// The coordinator validates what it launches: a generator's bug (here one
// backward left out of rank 1's program) fails the job with the
// validator's words before any worker hears of it.
TEST_F(JobManagerTest, AScheduleTheValidatorRefusesFailsTheJobAndStartsNoWorker) {
  options_.launch.generate_schedule = LosesABackwardOf(1);
  RestartCoordinator();
  AddWorkers(4);
  Job job = MustSubmit(Manifest("broken", 4));
  manager_->Tick();
  const Job failed = *manager_->Get(job.id());
  EXPECT_EQ(failed.status().state(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_THAT(failed.status().message(),
              HasSubstr("could not start: the chimera schedule for W=1 D=4 N=4 "
                        "is invalid: "));
  EXPECT_THAT(failed.status().message(), HasSubstr("rank 1"));
  for (const char* w : {"w0", "w1", "w2", "w3"}) {
    EXPECT_FALSE(Next(w).has_value()) << w;
    EXPECT_EQ(registry_->Get(w)->state(), chimera::v1::WORKER_STATE_IDLE) << w;
  }
}

// A full store made the head of the queue start and stop twice a second:
// its rank 0 was sent the start before the store refused to record it. Now
// nothing is sent until the start is recorded, and tries back off.
TEST_F(JobManagerTest, AStartTheFullStoreRefusedIsSentToNoWorkerAndTriedLess) {
  AddWorkers(4);
  ASSERT_TRUE(store_->LimitSize(1).ok());  // No more room from here on.
  absl::Status full;
  std::vector<Job> queued;
  for (int i = 0; i < 1000 && full.ok(); ++i) {
    absl::StatusOr<Job> job =
        manager_->Submit(Manifest(absl::StrCat("queued-", i), 4));
    full = job.status();
    if (job.ok()) queued.push_back(*job);
  }
  ASSERT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  ASSERT_FALSE(queued.empty());
  for (int tick = 0; tick < 5; ++tick) {
    manager_->Tick();
    now_ += absl::Milliseconds(500);
  }
  for (const char* w : {"w0", "w1", "w2", "w3"}) {
    EXPECT_FALSE(Next(w).has_value()) << w << " heard of a job never recorded";
    EXPECT_EQ(registry_->Get(w)->state(), chimera::v1::WORKER_STATE_IDLE) << w;
  }
  EXPECT_EQ(StateOf(queued.front()), chimera::v1::JOB_STATE_PENDING);

  // Room again: the head starts, at the next try after the pause.
  ASSERT_TRUE(store_->LimitSize(0).ok());
  manager_->Tick();
  EXPECT_EQ(StateOf(queued.front()), chimera::v1::JOB_STATE_PENDING)
      << "tried again before its pause was over";
  PassHeartbeatTimeout();  // 4 s on: past the 2 s pause.
  EXPECT_EQ(StateOf(queued.front()), chimera::v1::JOB_STATE_RUNNING);
  EXPECT_TRUE(Next("w0").has_value());
}

// A plan search for a large job took minutes with the manager's lock held,
// blocking every submit, and went on after its caller had gone.
TEST_F(JobManagerTest, APlanSearchHoldsNoLockAndStopsOnceItsCallerHasGone) {
  AddWorkers(4);
  int asked = 0;
  // Outlives the search: were the search holding the lock, the submit would
  // wait for it to end, and so would this future's destructor.
  std::future<bool> submit;
  bool submitted_during_search = false;
  const absl::StatusOr<std::vector<chimera::v1::Plan>> plans =
      manager_->Plans(Manifest("open", 4, /*fixed=*/false), 5, [&] {
        if (++asked < 3) return false;
        submit = std::async(std::launch::async, [this] {
          return manager_->Submit(Manifest("meanwhile", 4)).ok();
        });
        submitted_during_search =
            submit.wait_for(std::chrono::seconds(10)) == std::future_status::ready &&
            submit.get();
        return true;
      });
  EXPECT_TRUE(submitted_during_search);
  EXPECT_EQ(plans.status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(plans.status().message(), HasSubstr("cancelled after 2 candidates"));
}

// Rank `rank`'s report of `step` on w<rank>, with a timeline of `ops`
// instructions when `ops` > 0; returns whether the coordinator asks for
// timelines.
bool ReportWithTimeline(JobManager& manager, const Job& job, int rank, int step,
                        int ops) {
  chimera::v1::ReportMetricsRequest report = StepReport(job, rank, step);
  if (ops > 0) {
    chimera::v1::StepTimeline* timeline =
        report.mutable_metrics()->mutable_timeline();
    timeline->set_start_time(1000 + rank);
    for (int i = 0; i < ops; ++i) {
      timeline->add_op_start_seconds(i);
      timeline->add_op_end_seconds(i + 0.5);
    }
  }
  chimera::v1::ReportMetricsResponse response;
  EXPECT_TRUE(manager.OnMetrics(report, &response).ok());
  return response.record_timeline();
}

TEST_F(JobManagerTest, TraceAsksRanksForTimelinesOnlyWhileSomeoneWaits) {
  Job job = StartRunningJob(RestartableManifest(0));
  EXPECT_FALSE(ReportWithTimeline(*manager_, job, 0, 0, 0));

  absl::StatusOr<int> from = manager_->BeginTrace(job.id(), std::nullopt);
  ASSERT_TRUE(from.ok()) << from.status();
  EXPECT_EQ(*from, 0) << "no step has completed yet";
  // Rank 0 reported step 0 before anyone asked: step 0 cannot complete.
  for (int rank = 1; rank < 4; ++rank) {
    EXPECT_TRUE(ReportWithTimeline(*manager_, job, rank, 0, 3));
  }
  EXPECT_FALSE(manager_->TraceOf(job.id(), *from)->has_value());
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_TRUE(ReportWithTimeline(*manager_, job, rank, 1, 3));
  }
  absl::StatusOr<std::optional<chimera::v1::JobTrace>> trace =
      manager_->TraceOf(job.id(), *from);
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_TRUE(trace->has_value());
  EXPECT_EQ((*trace)->step(), 1);
  EXPECT_EQ((*trace)->plan().scheme(), "chimera");
  ASSERT_EQ((*trace)->ranks_size(), 4);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ((*trace)->ranks(rank).rank(), rank);
    EXPECT_EQ((*trace)->ranks(rank).worker_id(), absl::StrCat("w", rank));
    EXPECT_EQ((*trace)->ranks(rank).timeline().start_time(), 1000 + rank);
    EXPECT_EQ((*trace)->ranks(rank).timeline().op_end_seconds_size(), 3);
  }

  manager_->EndTrace(job.id(), *from);
  EXPECT_FALSE(ReportWithTimeline(*manager_, job, 0, 2, 3));
}

TEST_F(JobManagerTest, TraceOfAStepThatHasRunIsHeldOrRefusedByName) {
  Job job = StartRunningJob(RestartableManifest(0));
  absl::StatusOr<int> from = manager_->BeginTrace(job.id(), 0);
  ASSERT_TRUE(from.ok()) << from.status();
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_TRUE(ReportWithTimeline(*manager_, job, rank, 0, 2));
  }
  // Step 0 is what the waiter asked for: recording stops, so no later step
  // replaces it before the waiter reads it.
  for (int step = 1; step < 3; ++step) {
    for (int rank = 0; rank < 4; ++rank) {
      EXPECT_FALSE(ReportWithTimeline(*manager_, job, rank, step, 2));
    }
  }
  EXPECT_EQ((*manager_->TraceOf(job.id(), *from))->step(), 0);
  manager_->EndTrace(job.id(), *from);
  // Step 0 is held; steps 1 and 2 were never recorded.
  absl::StatusOr<int> held = manager_->BeginTrace(job.id(), 0);
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ((*manager_->TraceOf(job.id(), *held))->step(), 0);
  manager_->EndTrace(job.id(), *held);

  absl::StatusOr<int> past = manager_->BeginTrace(job.id(), 1);
  EXPECT_TRUE(absl::IsInvalidArgument(past.status())) << past.status();
  EXPECT_THAT(past.status().message(), HasSubstr("already run step 1"));
  EXPECT_THAT(past.status().message(), HasSubstr("ask for step 3"));
  absl::StatusOr<int> beyond = manager_->BeginTrace(job.id(), 10);
  EXPECT_TRUE(absl::IsInvalidArgument(beyond.status())) << beyond.status();
  EXPECT_THAT(beyond.status().message(), HasSubstr("steps 0 to 9"));
}

TEST_F(JobManagerTest, TraceOfUnknownOrEndedJobIsRefused) {
  EXPECT_TRUE(
      absl::IsNotFound(manager_->BeginTrace("nope", std::nullopt).status()));
  Job job = StartRunningJob();
  absl::StatusOr<int> from = manager_->BeginTrace(job.id(), std::nullopt);
  ASSERT_TRUE(from.ok()) << from.status();
  ASSERT_TRUE(manager_->Stop(job.id()).ok());
  absl::StatusOr<std::optional<chimera::v1::JobTrace>> waited =
      manager_->TraceOf(job.id(), *from);
  EXPECT_TRUE(absl::IsFailedPrecondition(waited.status())) << waited.status();
  EXPECT_THAT(waited.status().message(), HasSubstr("ended (STOPPED)"));
  manager_->EndTrace(job.id(), *from);
  absl::StatusOr<int> after = manager_->BeginTrace(job.id(), std::nullopt);
  EXPECT_TRUE(absl::IsFailedPrecondition(after.status())) << after.status();
}

TEST_F(JobManagerTest, TraceRecordedJustBeforeTheJobEndsIsStillReturned) {
  Job job = StartRunningJob();  // 2 steps
  absl::StatusOr<int> from = manager_->BeginTrace(job.id(), 1);
  ASSERT_TRUE(from.ok()) << from.status();
  for (int rank = 0; rank < 4; ++rank) {
    ReportWithTimeline(*manager_, job, rank, 1, 2);
    ASSERT_TRUE(Report(absl::StrCat("w", rank), job, rank,
                       chimera::v1::TASK_STATE_SUCCEEDED)
                    .ok());
  }
  EXPECT_EQ(StateOf(job), chimera::v1::JOB_STATE_SUCCEEDED);
  absl::StatusOr<std::optional<chimera::v1::JobTrace>> trace =
      manager_->TraceOf(job.id(), *from);
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_TRUE(trace->has_value());
  EXPECT_EQ((*trace)->step(), 1);
  manager_->EndTrace(job.id(), *from);
}

}  // namespace
}  // namespace chimera::coordinator
