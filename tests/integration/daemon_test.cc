// The product end to end: a chimera-coordinator process and real
// chimera-worker daemons on loopback train jobs, survive a killed worker, a
// stop and a coordinator restart.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/file_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/local_cluster.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace chimera {
namespace {

using ::chimera::testing::Ended;
using ::chimera::testing::LocalClusterTest;
using ::testing::HasSubstr;
using ::testing::Not;

class DaemonTest : public LocalClusterTest {
 protected:
  // The example Chimera job, submitted with more steps than any test waits
  // for, as it is once two of them are done (or it ended).
  chimera::v1::Job LongJobPastItsSecondStep() {
    absl::StatusOr<chimera::v1::Job> job = client_->Submit(ChimeraJob(100000));
    EXPECT_TRUE(job.ok()) << job.status();
    if (!job.ok()) return {};
    return AwaitJob(job->id(), [](const auto& j) {
      return j.status().completed_steps() >= 2 || Ended(j);
    });
  }
};

TEST_F(DaemonTest, CoordinatorAddressWithoutPortOrAsAUrlIsBadInput) {
  for (const char* address :
       {"127.0.0.1", "http://127.0.0.1:50051", "localhost:0"}) {
    const testing::ProcessResult worker =
        testing::RunProcess({CHIMERA_WORKER_BINARY, "daemon", "--coordinator", address});
    EXPECT_EQ(worker.exit_code, 2) << address << ": " << worker.err;
    EXPECT_THAT(worker.err,
                HasSubstr(absl::StrCat("--coordinator: address '", address)))
        << worker.err;
  }
}

TEST_F(DaemonTest, HostThatIsNoHostNameOrAddressIsBadInput) {
  using HostAndShown = std::pair<std::string, std::string>;
  for (const auto& [host, shown] : {HostAndShown{"127.0.0.1:80", "127.0.0.1:80"},
                                    HostAndShown{"worker\n0", "worker\\n0"}}) {
    const testing::ProcessResult worker = testing::RunProcess(
        {CHIMERA_WORKER_BINARY, "daemon", "--coordinator", "127.0.0.1:1", "--host", host});
    EXPECT_EQ(worker.exit_code, 2) << shown << ": " << worker.err;
    EXPECT_THAT(worker.err, HasSubstr("--host: '" + shown +
                                      "' is not a host name or an IP address"));
  }
}

// A daemon's /metrics names its jobs and hosts and has no token.
TEST_F(DaemonTest, MetricsBeyondLoopbackNeedMetricsPublic) {
  const testing::ProcessResult worker = testing::RunProcess(
      {CHIMERA_WORKER_BINARY, "daemon", "--coordinator", "127.0.0.1:1", "--metrics-listen", "0.0.0.0:0"});
  EXPECT_EQ(worker.exit_code, 2) << worker.err;
  EXPECT_THAT(worker.err, HasSubstr("refusing to serve metrics on non-loopback host "
                                    "'0.0.0.0' without --metrics-public"));
}

// Whoever may submit jobs may read the workers' data and write checkpoints
// inside their roots, and nothing else: an absolute path or a parent
// directory is refused at submit, a link out of the data root by the worker,
// whose message names the path and never a byte of the file.
TEST_F(DaemonTest, PathsOutsideTheWorkersRootsAreRefusedAtSubmitAndByTheWorker) {
  StartCoordinator();
  chimera::testing::TempDir outside;
  const std::string secret =
      outside.WriteFile("secret.txt", "root:SECRET-HASH:19000:0:99999:7:::\n" +
                                          std::string(4096, 'x'));
  const std::string data_root = dir_.path() + "/data";
  std::filesystem::create_directories(data_root);
  std::filesystem::create_symlink(secret, data_root + "/innocent.txt");
  StartWorkers(2, data_root);
  ASSERT_TRUE(AwaitIdleWorkers(2));

  chimera::v1::TrainJob absolute = TwoStageJob(1);
  absolute.mutable_spec()->mutable_data()->set_path("/etc/shadow");
  absl::StatusOr<chimera::v1::Job> refused = client_->Submit(absolute);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("spec.data.path: '/etc/shadow' is absolute"));
  chimera::v1::TrainJob parent = TwoStageJob(1);
  parent.mutable_spec()->mutable_training()->set_checkpoint_every(1);
  parent.mutable_spec()->mutable_training()->set_checkpoint_dir("../../usr/local/lib");
  refused = client_->Submit(parent);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("spec.training.checkpointDir: '../../usr/local/lib' names a parent"));
  chimera::v1::TrainJob cut = TwoStageJob(1);
  cut.mutable_spec()->mutable_data()->set_path(
      std::string("examples/data/corpus.txt\0/etc/shadow", 36));
  refused = client_->Submit(cut);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      refused.status().message(),
      HasSubstr("spec.data.path: 'examples/data/corpus.txt' is followed "
                "by a NUL byte"));

  chimera::v1::TrainJob linked = TwoStageJob(1);
  linked.mutable_spec()->mutable_data()->set_path("innocent.txt");
  absl::StatusOr<chimera::v1::Job> job = client_->Submit(linked);
  ASSERT_TRUE(job.ok()) << job.status();
  const chimera::v1::Job failed =
      AwaitState(job->id(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_EQ(failed.status().state(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_THAT(failed.status().message(),
              HasSubstr("spec.data.path: 'innocent.txt' leads out of the root"));
  EXPECT_THAT(failed.status().message(), Not(HasSubstr("SECRET")));
  EXPECT_THAT(failed.status().message(), Not(HasSubstr(outside.path())));
}

// The coordinator checks no data file: a binary file given as text trained,
// and the workers' errors showed clients their absolute data root. The job
// fails now, naming the file as the job does.
TEST_F(DaemonTest, ABinaryTextFileFailsTheJobNamingItAsTheJobDoes) {
  StartCoordinator();
  const std::string data_root = dir_.path() + "/data";
  std::filesystem::create_directories(data_root);
  std::ofstream(data_root + "/model.bin", std::ios::binary)
      << "\177ELF" << std::string(4096, '\0');
  StartWorkers(2, data_root);
  ASSERT_TRUE(AwaitIdleWorkers(2));

  chimera::v1::TrainJob binary = TwoStageJob(1);
  binary.mutable_spec()->mutable_data()->set_path("model.bin");
  absl::StatusOr<chimera::v1::Job> job = client_->Submit(binary);
  ASSERT_TRUE(job.ok()) << job.status();
  const chimera::v1::Job failed =
      AwaitState(job->id(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_EQ(failed.status().state(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_THAT(failed.status().message(), HasSubstr("'model.bin' is binary"));
  EXPECT_THAT(failed.status().message(), Not(HasSubstr(dir_.path())));
  EXPECT_THAT(failed.status().message(),
              Not(HasSubstr(std::filesystem::canonical(data_root).string())));
}

// A daemon started under a worker id in use takes the id over. The daemon it
// replaced used to end on a log line of ABORTED and exit 1, as if a job had
// failed; a supervisor restarting it would evict the newcomer in turn.
TEST_F(DaemonTest, ADaemonWhoseIdAnotherTookOverExitsWithStatus3NamingItsHost) {
  StartCoordinator();
  StartWorkers(1);
  ASSERT_TRUE(AwaitIdleWorkers(1));
  net::ChildProcess newcomer({CHIMERA_WORKER_BINARY, "daemon", "--coordinator", coordinator_->address(),
                              "--worker-id", "w0", "--host", "localhost", "--work-dir",
                              dir_.path() + "/newcomer"},
                             "", dir_.path() + "/newcomer.log");

  EXPECT_EQ(Worker(0).Wait(testing::kWorkersStartTimeout), 3);
  constexpr uint64_t kMaxLogBytes = 16 << 20;
  const std::string log = ReadTextFile(dir_.path() + "/w0.log", kMaxLogBytes).value_or("");
  EXPECT_THAT(log, HasSubstr("another daemon registered as worker 'w0' from host localhost"));
  EXPECT_THAT(log, HasSubstr("this daemon exits with status 3"));
  const absl::StatusOr<std::vector<chimera::v1::WorkerInfo>> workers = client_->Workers();
  ASSERT_TRUE(workers.ok()) << workers.status();
  ASSERT_EQ(workers->size(), 1u);
  EXPECT_EQ((*workers)[0].host(), "localhost");
  EXPECT_EQ((*workers)[0].state(), chimera::v1::WORKER_STATE_IDLE);
}

TEST_F(DaemonTest, ChimeraJobOnFourWorkersSucceedsWithMetricsAndFallingLoss) {
  StartCoordinator();
  StartWorkers(4);
  absl::StatusOr<chimera::v1::Job> job = client_->Submit(ChimeraJob(15));
  ASSERT_TRUE(job.ok()) << job.status();
  chimera::v1::Job done =
      AwaitState(job->id(), chimera::v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(done.status().state(), chimera::v1::JOB_STATE_SUCCEEDED)
      << done.status().message();
  EXPECT_EQ(done.status().completed_steps(), 15);
  ASSERT_EQ(done.workers_size(), 4);
  for (const auto& worker : done.workers()) {
    EXPECT_GT(worker.peak_memory_bytes(), 0);
    EXPECT_GE(worker.bubble_ratio(), 0);
    EXPECT_LT(worker.bubble_ratio(), 1);
    // The peak's split: AdamW keeps two moments per parameter.
    EXPECT_GT(worker.weights_bytes(), 0);
    EXPECT_EQ(worker.gradients_bytes(), worker.weights_bytes());
    EXPECT_EQ(worker.optimizer_bytes(), 2 * worker.weights_bytes());
    EXPECT_GT(worker.activations_bytes(), 0);
    EXPECT_EQ(worker.weights_bytes() + worker.gradients_bytes() +
                  worker.optimizer_bytes() + worker.activations_bytes(),
              worker.peak_memory_bytes());
  }
  std::vector<chimera::v1::StepSummary> steps;
  ASSERT_TRUE(client_
                  ->Watch(job->id(), false,
                          [&steps](const chimera::v1::JobEvent& event) {
                            if (event.has_step()) steps.push_back(event.step());
                          })
                  .ok());
  ASSERT_EQ(steps.size(), 15u);
  EXPECT_LT(steps.back().loss(), steps.front().loss() - 0.5);
  EXPECT_TRUE(AwaitIdleWorkers(4));
}

TEST_F(DaemonTest, KilledWorkerFailsTheJobNamingItAndTheOthersTakeTheNextJob) {
  StartCoordinator();
  StartWorkers(4);
  absl::StatusOr<chimera::v1::Job> job = client_->Submit(ChimeraJob(100000));
  ASSERT_TRUE(job.ok()) << job.status();
  chimera::v1::Job running = AwaitJob(job->id(), [](const auto& j) {
    return j.status().completed_steps() >= 2;
  });
  ASSERT_GE(running.status().completed_steps(), 2);
  // kill -9 the worker running rank 2.
  const int victim = WorkerOfRank(job->id(), 2);
  ASSERT_GE(victim, 0);
  const absl::Time killed = absl::Now();
  Worker(victim).Signal(SIGKILL);
  chimera::v1::Job failed =
      AwaitState(job->id(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_EQ(failed.status().state(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_THAT(failed.status().message(),
              HasSubstr(absl::StrCat("worker w", victim, " ")));
  // Heartbeat timeout (3 s) plus the coordinator's loop and our polling.
  EXPECT_LT(absl::Now() - killed, absl::Seconds(10));

  EXPECT_TRUE(AwaitIdleWorkers(3));
  absl::StatusOr<chimera::v1::Job> next = client_->Submit(TwoStageJob(3));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(
      AwaitState(next->id(), chimera::v1::JOB_STATE_SUCCEEDED).status().state(),
      chimera::v1::JOB_STATE_SUCCEEDED);
}

TEST_F(DaemonTest,
       KilledWorkerWithARestartLeftResumesFromTheCheckpointOnTheSpare) {
  constexpr int kSteps = 12;
  StartCoordinator();
  StartWorkers(5);
  ASSERT_TRUE(AwaitIdleWorkers(5));
  // float64, so that the resumed run can be compared with an uninterrupted
  // one exactly.
  chimera::v1::TrainJob manifest = ChimeraJob(kSteps);
  manifest.mutable_spec()->mutable_model()->set_dtype("float64");
  manifest.mutable_spec()->mutable_training()->set_checkpoint_every(2);
  manifest.mutable_spec()->mutable_training()->set_checkpoint_dir("checkpoints");
  manifest.mutable_spec()->mutable_run_policy()->set_backoff_limit(1);
  absl::StatusOr<chimera::v1::Job> job = client_->Submit(manifest);
  ASSERT_TRUE(job.ok()) << job.status();
  const chimera::v1::Job running = AwaitJob(job->id(), [](const auto& j) {
    return j.status().checkpoint_step() >= 4 || Ended(j);
  });
  ASSERT_EQ(running.status().state(), chimera::v1::JOB_STATE_RUNNING)
      << running.status().message();
  ASSERT_LT(running.status().completed_steps(), kSteps)
      << "the job ended before the kill";

  // kill -9 the worker running rank 2: the job goes on without it.
  const int victim = WorkerOfRank(job->id(), 2);
  ASSERT_GE(victim, 0);
  Worker(victim).Signal(SIGKILL);
  const chimera::v1::Job done = AwaitJob(job->id(), Ended);
  ASSERT_EQ(done.status().state(), chimera::v1::JOB_STATE_SUCCEEDED)
      << done.status().message();
  EXPECT_EQ(done.status().restarts(), 1);
  EXPECT_EQ(done.status().completed_steps(), kSteps);
  for (const auto& worker : done.workers())
    EXPECT_NE(worker.worker_id(), absl::StrCat("w", victim));
  // Checkpoints go to <checkpoint root>/<checkpointDir>/<job id>, one file
  // per model stage of the plan (its last stage here); the last two are
  // kept.
  const std::string checkpoints =
      absl::StrCat(dir_.path(), "/checkpoints/", job->id());
  ASSERT_GT(done.plan().partition_size(), 0);
  const chimera::v1::StageRange& last = *done.plan().partition().rbegin();
  EXPECT_TRUE(std::ifstream(absl::StrCat(checkpoints, "/step-", kSteps, "/blocks-",
                                         last.first_layer(), "-",
                                         last.first_layer() + last.num_layers(), ".pt"))
                  .good());
  EXPECT_TRUE(
      std::filesystem::exists(absl::StrCat(checkpoints, "/step-", kSteps - 2)));
  EXPECT_FALSE(
      std::filesystem::exists(absl::StrCat(checkpoints, "/step-", kSteps - 4)));

  // The same job again, uninterrupted, on the four workers that are left:
  // every step's loss is what the resumed job had (steps it ran twice count
  // with their last run, the one after the restart).
  ASSERT_TRUE(AwaitIdleWorkers(4));
  absl::StatusOr<chimera::v1::Job> reference = client_->Submit(manifest);
  ASSERT_TRUE(reference.ok()) << reference.status();
  ASSERT_EQ(AwaitState(reference->id(), chimera::v1::JOB_STATE_SUCCEEDED)
                .status()
                .state(),
            chimera::v1::JOB_STATE_SUCCEEDED);
  // The killed daemon may have taken one step's record with it: the step
  // before the checkpoint the job resumed from, when that checkpoint was
  // completed in the milliseconds before its report went (operations.md,
  // "Checkpoints and restarts").
  const std::map<int, double> resumed = Losses(job->id());
  const std::map<int, double> uninterrupted = Losses(reference->id());
  ASSERT_EQ(uninterrupted.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(done.status().recoveries_size(), 1);
  const int resumed_from = done.status().recoveries(0).checkpoint_step();
  for (const auto& [step, loss] : uninterrupted) {
    if (resumed.count(step) == 0) {
      EXPECT_EQ(step, resumed_from - 1) << "step " << step << " unrecorded";
      continue;
    }
    EXPECT_NEAR(resumed.at(step), loss, 1e-9 * loss) << "step " << step;
  }
}

TEST_F(DaemonTest, StoppedJobIsStoppedWithinSecondsAndWorkersGoIdle) {
  StartCoordinator();
  StartWorkers(4);
  absl::StatusOr<chimera::v1::Job> job = client_->Submit(ChimeraJob(100000));
  ASSERT_TRUE(job.ok()) << job.status();
  AwaitJob(job->id(),
           [](const auto& j) { return j.status().completed_steps() >= 1; });
  const absl::Time asked = absl::Now();
  absl::StatusOr<chimera::v1::Job> stopped = client_->Stop(job->id());
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(stopped->status().state(), chimera::v1::JOB_STATE_STOPPED);
  EXPECT_TRUE(AwaitIdleWorkers(4));
  EXPECT_LT(absl::Now() - asked, absl::Seconds(10));
}

TEST_F(DaemonTest, KilledCoordinatorsRunningJobGoesOnAsTheSameAttempt) {
  StartCoordinator();
  StartWorkers(4);
  const chimera::v1::Job before = LongJobPastItsSecondStep();
  ASSERT_EQ(before.status().state(), chimera::v1::JOB_STATE_RUNNING)
      << before.status().message();
  ASSERT_EQ(before.workers_size(), 4);
  StartCoordinator(KillCoordinator());

  // Steps are recorded again once every rank is back with the new
  // coordinator; the job was neither failed nor restarted.
  const int64_t steps_before = before.status().completed_steps();
  const chimera::v1::Job after = AwaitJob(
      before.id(),
      [steps_before](const auto& j) {
        return j.status().completed_steps() > steps_before + 3 || Ended(j);
      },
      absl::Seconds(60));
  EXPECT_EQ(after.status().state(), chimera::v1::JOB_STATE_RUNNING)
      << after.status().message();
  EXPECT_GT(after.status().completed_steps(), steps_before + 3);
  EXPECT_EQ(after.status().restarts(), 0);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(absl::StrCat("w", WorkerOfRank(before.id(), rank)),
              before.workers(rank).worker_id())
        << "rank " << rank << " kept its worker";
  }
  ASSERT_TRUE(client_->Stop(before.id()).ok());
  EXPECT_TRUE(AwaitIdleWorkers(4));
}

// SIGSTOP of the coordinator for four times the heartbeat timeout: at the
// instant it resumes, every worker's last heartbeat is old, through no fault
// of theirs. The job goes on as if nothing happened.
TEST_F(DaemonTest, APausedCoordinatorBlamesNoWorkerForItsOwnSilence) {
  constexpr absl::Duration kPause = absl::Seconds(12);
  StartCoordinator();
  StartWorkers(4);
  const chimera::v1::Job before = LongJobPastItsSecondStep();
  ASSERT_EQ(before.status().state(), chimera::v1::JOB_STATE_RUNNING)
      << before.status().message();
  coordinator_->process().Signal(SIGSTOP);
  absl::SleepFor(kPause);  // The fault itself, not a wait for anything.
  coordinator_->process().Signal(SIGCONT);

  const int64_t steps_before = before.status().completed_steps();
  const chimera::v1::Job after = AwaitJob(
      before.id(),
      [steps_before](const auto& j) {
        return j.status().completed_steps() > steps_before + 20 || Ended(j);
      },
      absl::Seconds(60));
  EXPECT_EQ(after.status().state(), chimera::v1::JOB_STATE_RUNNING)
      << after.status().message();
  EXPECT_EQ(after.status().restarts(), 0);
  const absl::StatusOr<std::vector<chimera::v1::WorkerInfo>> workers =
      client_->Workers();
  ASSERT_TRUE(workers.ok()) << workers.status();
  for (const auto& worker : *workers) {
    EXPECT_EQ(worker.state(), chimera::v1::WORKER_STATE_BUSY)
        << worker.worker_id();
  }
  ASSERT_TRUE(client_->Stop(before.id()).ok());
}

TEST_F(DaemonTest, JobWhoseWorkerDiedWithTheCoordinatorFailsNamingItsRank) {
  StartCoordinator();
  StartWorkers(4);
  const chimera::v1::Job before = LongJobPastItsSecondStep();
  ASSERT_EQ(before.status().state(), chimera::v1::JOB_STATE_RUNNING)
      << before.status().message();
  // The coordinator and the worker of rank 1 go down together.
  const int victim = WorkerOfRank(before.id(), 1);
  ASSERT_GE(victim, 0);
  Worker(victim).Signal(SIGKILL);
  // Room for the live workers' reconnect backoff on a loaded machine (the
  // sanitized build missed 8 s), none for the dead one.
  StartCoordinator(KillCoordinator(), {"--readopt-timeout", "20"});

  const chimera::v1::Job failed =
      AwaitState(before.id(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_EQ(failed.status().state(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_THAT(failed.status().message(),
              HasSubstr("the coordinator restarted and the worker of rank 1 "
                        "did not register again within 20s"));
  EXPECT_TRUE(AwaitIdleWorkers(3)) << "the others are told to stop";
}

TEST_F(DaemonTest, RestartedCoordinatorKeepsTheQueueAndWorkersRegisterAgain) {
  StartCoordinator();
  StartWorkers(2);
  ASSERT_TRUE(AwaitIdleWorkers(2));
  // Neither fits on two workers: both stay queued.
  const std::string first = client_->Submit(ChimeraJob(5))->id();
  const std::string second = client_->Submit(ChimeraJob(5))->id();
  const std::string address = coordinator_->address();
  StopCoordinator();
  StartCoordinator(address);
  EXPECT_EQ(client_->Get(first)->status().state(),
            chimera::v1::JOB_STATE_PENDING);
  EXPECT_EQ(client_->Get(second)->status().state(),
            chimera::v1::JOB_STATE_PENDING);
  EXPECT_EQ(client_->List(chimera::v1::JOB_STATE_UNSPECIFIED)->size(), 2u);
  EXPECT_TRUE(AwaitIdleWorkers(2))
      << "workers did not register with the new coordinator";
  // With two more workers the queue moves, in order.
  StartWorkers(2);
  EXPECT_EQ(
      AwaitState(first, chimera::v1::JOB_STATE_SUCCEEDED).status().state(),
      chimera::v1::JOB_STATE_SUCCEEDED);
}

}  // namespace
}  // namespace chimera
