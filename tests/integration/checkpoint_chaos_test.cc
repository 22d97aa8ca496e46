// Faults must not lose training. A job with checkpoints and restarts left
// survives, in one run, a coordinator killed while its workers train on, a
// daemon killed with its task meanwhile, and a task killed later; a daemon
// stopped (SIGSTOP) while its task writes checkpoints the coordinator never
// hears of. Each time the job resumes from the latest complete checkpoint on
// disk, no complete checkpoint is ever lost (the latest one on disk never
// goes back, watched throughout), and the job ends SUCCEEDED with the final
// weights of an uninterrupted run (float64, within 1e-9). An elastic job
// goes on with fewer workers, re-planned, and ends with those weights too:
// after losing a worker, and after a rank hangs.
#include <ATen/ATen.h>
#include <signal.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/directory.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/local_cluster.h"
#include "worker/runtime/checkpoint.h"

namespace chimera {
namespace {

using ::chimera::testing::Ended;
using ::chimera::testing::LocalClusterTest;

constexpr absl::Duration kWatchInterval = absl::Milliseconds(20);

// Watches a job's checkpoint directory from the side, as an operator's
// backup script would, and remembers whether the latest complete step ever
// went back: a complete checkpoint lost.
class CheckpointWatcher {
 public:
  CheckpointWatcher(const std::string& root, const std::string& job_dir,
                    int num_layers)
      : thread_([=] { Watch(root, job_dir, num_layers); }) {}
  ~CheckpointWatcher() {
    stop_ = true;
    thread_.join();
  }

  int64_t latest() const {
    absl::MutexLock lock(&mutex_);
    return latest_;
  }
  std::string losses() const {
    absl::MutexLock lock(&mutex_);
    return losses_;
  }
  // Waits until the latest complete step is at least `step`.
  bool AwaitLatest(int64_t step, absl::Duration timeout) const {
    absl::MutexLock lock(&mutex_);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
      return latest_ >= step;
    };
    return mutex_.AwaitWithTimeout(absl::Condition(&reached), timeout);
  }

 private:
  void Watch(const std::string& root, const std::string& job_dir,
             int num_layers) {
    while (!stop_) {
      absl::StatusOr<Directory> opened = Directory::OpenRoot(root);
      absl::StatusOr<worker::CheckpointDir> checkpoints =
          opened.ok() ? worker::CheckpointDir::Open(*opened, job_dir, 0, false)
                      : opened.status();
      const int64_t seen =
          checkpoints.ok() ? checkpoints->LatestComplete(num_layers).value_or(0)
                           : 0;
      {
        absl::MutexLock lock(&mutex_);
        if (seen < latest_ && losses_.empty()) {
          losses_ = absl::StrCat("the latest complete checkpoint was step ",
                                  latest_, ", then step ", seen);
        }
        latest_ = std::max(latest_, seen);
      }
      absl::SleepFor(kWatchInterval);
    }
  }

  mutable absl::Mutex mutex_;
  int64_t latest_ ABSL_GUARDED_BY(mutex_) = 0;
  std::string losses_ ABSL_GUARDED_BY(mutex_);
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Slows a process down, as a throttled or shared core would: it is stopped
// for `stopped` of every `period` until the throttle is destroyed.
class Throttle {
 public:
  Throttle(pid_t pid, absl::Duration period, absl::Duration stopped)
      : thread_([this, pid, period, stopped] {
          while (!stop_) {
            kill(pid, SIGSTOP);
            absl::SleepFor(stopped);
            kill(pid, SIGCONT);
            absl::SleepFor(period - stopped);
          }
        }) {}
  ~Throttle() {
    stop_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Every tensor of checkpoint `step` of the job whose directory is `dir`, by
// its key in the stage files.
std::map<std::string, at::Tensor> Weights(const std::string& dir,
                                          int64_t step) {
  std::map<std::string, at::Tensor> weights;
  const std::string step_dir = absl::StrCat(dir, "/step-", step);
  for (const auto& entry : std::filesystem::directory_iterator(step_dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::vector<char> bytes{std::istreambuf_iterator<char>(in), {}};
    const c10::IValue value = torch::jit::pickle_load(bytes);
    for (const auto& item : value.toGenericDict()) {
      weights[item.key().toStringRef()] = item.value().toTensor();
    }
  }
  return weights;
}

void ExpectSameWeights(const std::string& dir, const std::string& reference,
                       int64_t step) {
  const auto resumed = Weights(dir, step);
  const auto uninterrupted = Weights(reference, step);
  ASSERT_FALSE(uninterrupted.empty());
  ASSERT_EQ(resumed.size(), uninterrupted.size());
  for (const auto& [name, tensor] : uninterrupted) {
    ASSERT_EQ(resumed.count(name), 1u) << name;
    EXPECT_TRUE(at::allclose(resumed.at(name), tensor, /*rtol=*/1e-9,
                             /*atol=*/1e-12))
        << name << " differs by up to "
        << (resumed.at(name) - tensor).abs().max().item<double>();
  }
}

// A job's recoveries, a line each, for a failure's message.
std::string Recoveries(const chimera::v1::Job& job) {
  std::string lines;
  for (const chimera::v1::JobRecovery& recovery : job.status().recoveries()) {
    absl::StrAppend(&lines, recovery.cause(), ": ", recovery.reason(), "\n");
  }
  return lines;
}

class CheckpointChaosTest : public LocalClusterTest {
 protected:
  // `job` in float64 with checkpoints every `every` steps and `restarts`.
  static chimera::v1::TrainJob Checkpointed(chimera::v1::TrainJob job,
                                            int every, int restarts) {
    job.mutable_spec()->mutable_model()->set_dtype("float64");
    job.mutable_spec()->mutable_training()->set_checkpoint_every(every);
    job.mutable_spec()->mutable_training()->set_checkpoint_dir("checkpoints");
    job.mutable_spec()->mutable_run_policy()->set_backoff_limit(restarts);
    return job;
  }

  // The example Chimera job of `steps` steps, checkpointed every `every`
  // with 3 restarts, that may go on with `min_workers` of its 4 workers.
  chimera::v1::TrainJob ElasticJob(int steps, int every, int min_workers) {
    chimera::v1::TrainJob job = Checkpointed(ChimeraJob(steps), every, 3);
    job.mutable_spec()->mutable_resources()->set_min_workers(min_workers);
    return job;
  }

  // kill -9 of worker `index`'s daemon and then of its task (which a
  // daemon's death alone leaves running); the task's pid.
  pid_t KillWithItsTask(int index) {
    const pid_t task = TaskProcessOf(index);
    Worker(index).Signal(SIGKILL);
    if (task > 0) kill(task, SIGKILL);
    return task;
  }

  std::string CheckpointsOf(const std::string& id) const {
    return absl::StrCat("checkpoints/", id);
  }

  // Runs `manifest` again, uninterrupted, in a single process (one rank
  // holding the whole model: every scheme computes its weights), and checks
  // that `id` ended with its final weights.
  void ExpectWeightsOfAnUninterruptedRun(chimera::v1::TrainJob manifest,
                                         const std::string& id) {
    chimera::v1::JobSpec& spec = *manifest.mutable_spec();
    spec.clear_parallelism();
    spec.mutable_parallelism()->set_schedule("gpipe");
    spec.mutable_parallelism()->set_pipeline(1);
    spec.mutable_resources()->set_workers(1);
    spec.mutable_resources()->clear_min_workers();
    ASSERT_TRUE(AwaitIdleWorkers(1));
    absl::StatusOr<chimera::v1::Job> reference = client_->Submit(manifest);
    ASSERT_TRUE(reference.ok()) << reference.status();
    const chimera::v1::Job done = AwaitJob(reference->id(), Ended);
    ASSERT_EQ(done.status().state(), chimera::v1::JOB_STATE_SUCCEEDED)
        << done.status().message();
    EXPECT_EQ(done.status().restarts(), 0) << Recoveries(done);
    ExpectSameWeights(absl::StrCat(dir_.path(), "/", CheckpointsOf(id)),
                      absl::StrCat(dir_.path(), "/", CheckpointsOf(done.id())),
                      manifest.spec().training().max_steps());
  }
};

TEST_F(CheckpointChaosTest,
       AJobSurvivesAKilledCoordinatorDaemonAndTaskWithTheWeightsOfAnUninterruptedRun) {
  // The faults take about 5 * kEvery steps; the rest is the margin that keeps
  // the last fault before the job's end, with steps as fast as they get.
  constexpr int kSteps = 96;
  constexpr int kEvery = 8;
  StartCoordinator("127.0.0.1:0", {"--readopt-timeout", "4"});
  StartWorkers(4);
  ASSERT_TRUE(AwaitIdleWorkers(4));
  const chimera::v1::TrainJob manifest =
      Checkpointed(ChimeraJob(kSteps), kEvery, 3);
  absl::StatusOr<chimera::v1::Job> job = client_->Submit(manifest);
  ASSERT_TRUE(job.ok()) << job.status();
  const CheckpointWatcher watcher(dir_.path(), CheckpointsOf(job->id()),
                                  manifest.spec().model().num_layers());
  const chimera::v1::Job running = AwaitJob(job->id(), [](const auto& j) {
    return j.status().checkpoint_step() >= 2 * kEvery || Ended(j);
  });
  ASSERT_EQ(running.status().state(), chimera::v1::JOB_STATE_RUNNING)
      << running.status().message();

  // The coordinator dies; the workers train on and write checkpoints it
  // never hears of; then a daemon dies with its task, and both come back.
  const int victim = WorkerOfRank(job->id(), 1);
  ASSERT_GE(victim, 0);
  const pid_t task = TaskProcessOf(victim);
  ASSERT_GT(task, 0);
  const std::string address = KillCoordinator();
  ASSERT_TRUE(watcher.AwaitLatest(
      running.status().checkpoint_step() + 3 * kEvery, absl::Seconds(120)))
      << "the workers did not train on without the coordinator";
  const int64_t on_disk = watcher.latest();
  Worker(victim).Signal(SIGKILL);
  kill(task, SIGKILL);
  StartCoordinator(address, {"--readopt-timeout", "4"});
  RestartWorker(victim);

  // Rank 1 does not come back: the job restarts, from what is on disk.
  const chimera::v1::Job restarted = AwaitJob(job->id(), [&](const auto& j) {
    return (j.status().restarts() == 1 &&
            j.status().state() == chimera::v1::JOB_STATE_RUNNING &&
            j.status().completed_steps() >= on_disk + 2) ||
           Ended(j);
  });
  ASSERT_EQ(restarted.status().state(), chimera::v1::JOB_STATE_RUNNING)
      << restarted.status().message();
  EXPECT_GE(restarted.status().checkpoint_step(), on_disk)
      << "the restart began before the latest complete checkpoint";

  // A task is killed (as the kernel's OOM killer would): restarted again.
  const int second = WorkerOfRank(job->id(), 2);
  ASSERT_GE(second, 0);
  const pid_t second_task = TaskProcessOf(second);
  ASSERT_GT(second_task, 0);
  kill(second_task, SIGKILL);

  const chimera::v1::Job done = AwaitJob(job->id(), Ended);
  ASSERT_EQ(done.status().state(), chimera::v1::JOB_STATE_SUCCEEDED)
      << done.status().message();
  EXPECT_EQ(done.status().restarts(), 2);
  EXPECT_EQ(done.status().completed_steps(), kSteps);
  EXPECT_EQ(watcher.latest(), kSteps);
  EXPECT_EQ(watcher.losses(), "") << "a complete checkpoint was lost";
  ExpectWeightsOfAnUninterruptedRun(manifest, job->id());
}

TEST_F(CheckpointChaosTest,
       AStoppedDaemonsJobResumesFromTheCheckpointsItsTaskWroteMeanwhile) {
  constexpr int kSteps = 40;
  constexpr int kEvery = 2;
  StartCoordinator();
  StartWorkers(1);
  ASSERT_TRUE(AwaitIdleWorkers(1));
  chimera::v1::TrainJob one_rank = TwoStageJob(kSteps);
  one_rank.mutable_spec()->mutable_parallelism()->set_schedule("gpipe");
  one_rank.mutable_spec()->mutable_parallelism()->set_pipeline(1);
  one_rank.mutable_spec()->mutable_resources()->set_workers(1);
  const chimera::v1::TrainJob manifest = Checkpointed(one_rank, kEvery, 1);
  absl::StatusOr<chimera::v1::Job> job = client_->Submit(manifest);
  ASSERT_TRUE(job.ok()) << job.status();
  const CheckpointWatcher watcher(dir_.path(), CheckpointsOf(job->id()),
                                  manifest.spec().model().num_layers());
  const chimera::v1::Job running = AwaitJob(job->id(), [](const auto& j) {
    return j.status().checkpoint_step() >= kEvery || Ended(j);
  });
  ASSERT_EQ(running.status().state(), chimera::v1::JOB_STATE_RUNNING)
      << running.status().message();

  // Its daemon stops: the coordinator, hearing nothing, queues the job
  // again, and it waits for a worker while the task trains on and writes
  // checkpoints the coordinator never hears of. Then a worker comes.
  ASSERT_EQ(WorkerOfRank(job->id(), 0), 0);
  Worker(0).Signal(SIGSTOP);
  const chimera::v1::Job restarted = AwaitJob(job->id(), [](const auto& j) {
    return j.status().restarts() == 1 || Ended(j);
  });
  ASSERT_EQ(restarted.status().restarts(), 1) << restarted.status().message();
  const int64_t coordinator_saw = restarted.status().checkpoint_step();
  ASSERT_TRUE(watcher.AwaitLatest(coordinator_saw + 2 * kEvery,
                                  absl::Seconds(120)))
      << "the task wrote no checkpoint the coordinator did not see";
  StartWorkers(1);
  AwaitJob(job->id(), [](const auto& j) {
    return j.status().state() == chimera::v1::JOB_STATE_RUNNING || Ended(j);
  });
  Worker(0).Signal(SIGCONT);

  const chimera::v1::Job done = AwaitJob(job->id(), Ended);
  ASSERT_EQ(done.status().state(), chimera::v1::JOB_STATE_SUCCEEDED)
      << done.status().message();
  EXPECT_EQ(done.status().restarts(), 1);
  EXPECT_EQ(watcher.latest(), kSteps);
  EXPECT_EQ(watcher.losses(), "") << "a complete checkpoint was lost";
  ExpectWeightsOfAnUninterruptedRun(manifest, job->id());
}

// An elastic job (minWorkers 2 of 4) loses a worker to kill -9 and freezes
// another (daemon and task stopped, never continued): each time it goes on
// with the workers left, re-planned for them with the same global batch,
// from its latest complete checkpoint. Its coordinator is then killed and
// restarted and takes the shrunk run back. It ends with the weights of an
// uninterrupted single-process run.
TEST_F(
    CheckpointChaosTest,
    AnElasticJobGoesOnWithTheWorkersLeftAndEndsWithTheWeightsOfAnUninterruptedRun) {
  constexpr int kSteps = 40;
  constexpr int kEvery = 4;
  StartCoordinator("127.0.0.1:0", {"--readopt-timeout", "4"});
  StartWorkers(4);
  ASSERT_TRUE(AwaitIdleWorkers(4));
  const chimera::v1::TrainJob manifest = ElasticJob(kSteps, kEvery, 2);
  absl::StatusOr<chimera::v1::Job> job = client_->Submit(manifest);
  ASSERT_TRUE(job.ok()) << job.status();
  const CheckpointWatcher watcher(dir_.path(), CheckpointsOf(job->id()),
                                  manifest.spec().model().num_layers());
  // Running on `ranks` workers after `restarts` restarts, a step past the
  // checkpoint it resumed from; prints how long that took since `fault`.
  auto await_running_on = [&](int restarts, int ranks, absl::Time fault) {
    const chimera::v1::Job running = AwaitJob(job->id(), [&](const auto& j) {
      return (j.status().restarts() == restarts &&
              j.status().state() == chimera::v1::JOB_STATE_RUNNING &&
              j.status().completed_steps() > j.status().checkpoint_step() &&
              j.status().checkpoint_step() >= (restarts + 1) * kEvery) ||
             Ended(j);
    });
    EXPECT_EQ(running.status().state(), chimera::v1::JOB_STATE_RUNNING)
        << running.status().message();
    EXPECT_EQ(running.plan().width() * running.plan().depth(), ranks)
        << running.plan().ShortDebugString();
    if (restarts == 0) return running;
    std::cout << "training again on " << ranks << " workers ("
              << running.plan().scheme() << " W=" << running.plan().width()
              << " D=" << running.plan().depth() << ") "
              << absl::FormatDuration(absl::Now() - fault)
              << " after the fault\n";
    return running;
  };
  await_running_on(0, 4, absl::Now());

  // A worker dies with its task, and no idle worker can replace it.
  const int killed = WorkerOfRank(job->id(), 1);
  ASSERT_GE(killed, 0);
  absl::Time fault = absl::Now();
  ASSERT_GT(KillWithItsTask(killed), 0);
  const chimera::v1::Job on_three = await_running_on(1, 3, fault);
  EXPECT_THAT(on_three.status().restart_cause(),
              ::testing::HasSubstr(absl::StrCat("worker w", killed)));

  // Another freezes, its task with it.
  const int frozen = WorkerOfRank(job->id(), 0);
  ASSERT_GE(frozen, 0);
  const pid_t frozen_task = TaskProcessOf(frozen);
  ASSERT_GT(frozen_task, 0);
  fault = absl::Now();
  Worker(frozen).Signal(SIGSTOP);
  kill(frozen_task, SIGSTOP);
  const chimera::v1::Job on_two = await_running_on(2, 2, fault);
  EXPECT_THAT(on_two.status().restart_cause(),
              ::testing::HasSubstr(absl::StrCat("worker w", frozen)));

  // The coordinator dies and comes back; the two workers' ranks go on.
  const int64_t before = on_two.status().completed_steps();
  fault = absl::Now();
  StartCoordinator(KillCoordinator(), {"--readopt-timeout", "4"});
  const chimera::v1::Job adopted = AwaitJob(job->id(), [&](const auto& j) {
    return j.status().completed_steps() > before + 1 || Ended(j);
  });
  EXPECT_EQ(adopted.status().restarts(), 2)
      << "the restarted coordinator did not take the run back: "
      << adopted.status().message();
  std::cout << "steps recorded again "
            << absl::FormatDuration(absl::Now() - fault)
            << " after the coordinator was killed\n";

  const chimera::v1::Job done = AwaitJob(job->id(), Ended);
  ASSERT_EQ(done.status().state(), chimera::v1::JOB_STATE_SUCCEEDED)
      << done.status().message();
  EXPECT_EQ(done.status().restarts(), 2);
  EXPECT_EQ(done.plan().width() * done.plan().depth(), 2);
  EXPECT_EQ(watcher.latest(), kSteps);
  EXPECT_EQ(watcher.losses(), "") << "a complete checkpoint was lost";
  kill(frozen_task, SIGKILL);
  ExpectWeightsOfAnUninterruptedRun(manifest, job->id());
}

// An elastic job that went on with 2 of its 4 workers moves back to 4 at a
// checkpoint once two workers register again, and ends with the weights of
// an uninterrupted run.
TEST_F(
    CheckpointChaosTest,
    AShrunkJobGrowsBackWhenWorkersReturnAndEndsWithTheWeightsOfAnUninterruptedRun) {
  constexpr int kSteps = 40;
  constexpr int kEvery = 4;
  // On one host's two cores, four workers are rightly not predicted faster
  // than two.
  node_per_worker_ = true;
  StartCoordinator();
  StartWorkers(4);
  ASSERT_TRUE(AwaitIdleWorkers(4));
  const chimera::v1::TrainJob manifest = ElasticJob(kSteps, kEvery, 2);
  absl::StatusOr<chimera::v1::Job> job = client_->Submit(manifest);
  ASSERT_TRUE(job.ok()) << job.status();
  AwaitJob(job->id(), [](const auto& j) {
    return j.status().checkpoint_step() >= kEvery || Ended(j);
  });

  std::vector<int> lost;
  for (int rank : {1, 2}) {
    lost.push_back(WorkerOfRank(job->id(), rank));
    ASSERT_GE(lost.back(), 0);
    KillWithItsTask(lost.back());
  }
  const chimera::v1::Job shrunk = AwaitJob(job->id(), [](const auto& j) {
    return (j.status().state() == chimera::v1::JOB_STATE_RUNNING &&
            j.plan().width() * j.plan().depth() == 2 &&
            j.status().completed_steps() > j.status().checkpoint_step()) ||
           Ended(j);
  });
  ASSERT_EQ(shrunk.status().state(), chimera::v1::JOB_STATE_RUNNING)
      << shrunk.status().message();

  const absl::Time back = absl::Now();
  for (int worker : lost) RestartWorker(worker);
  const chimera::v1::Job grown = AwaitJob(job->id(), [](const auto& j) {
    return (j.status().state() == chimera::v1::JOB_STATE_RUNNING &&
            j.plan().width() * j.plan().depth() == 4) ||
           Ended(j);
  });
  ASSERT_EQ(grown.status().state(), chimera::v1::JOB_STATE_RUNNING)
      << grown.status().message();
  std::cout << "running on 4 workers again "
            << absl::FormatDuration(absl::Now() - back)
            << " after two workers came back: "
            << grown.status().restart_cause() << "\n";
  EXPECT_THAT(grown.status().restart_cause(),
              ::testing::HasSubstr("growing from"));
  EXPECT_EQ(grown.status().restarts(), shrunk.status().restarts())
      << "a growth is no restart";

  const chimera::v1::Job done = AwaitJob(job->id(), Ended);
  ASSERT_EQ(done.status().state(), chimera::v1::JOB_STATE_SUCCEEDED)
      << done.status().message();
  ExpectWeightsOfAnUninterruptedRun(manifest, job->id());
}

// A rank hangs: its task process stops (SIGSTOP) while its daemon lives on
// and heartbeats. The watchdog finds it, names its worker and the op it is
// stuck in, and the elastic job goes on without that worker, though it
// becomes idle again, and ends with the weights of an uninterrupted run.
TEST_F(CheckpointChaosTest,
       AHungRankIsNamedWithItsOpAndTheJobGoesOnWithoutItsWorker) {
  constexpr int kSteps = 24;
  constexpr int kEvery = 4;
  // Well above the slowest step (a checkpoint's) of a loaded machine, so
  // that only the stopped rank stalls.
  constexpr int kProgressTimeoutSeconds = 10;
  StartCoordinator("127.0.0.1:0", {"--progress-timeout",
                                   absl::StrCat(kProgressTimeoutSeconds)});
  StartWorkers(4);
  ASSERT_TRUE(AwaitIdleWorkers(4));
  const chimera::v1::TrainJob manifest = ElasticJob(kSteps, kEvery, 2);
  absl::StatusOr<chimera::v1::Job> job = client_->Submit(manifest);
  ASSERT_TRUE(job.ok()) << job.status();
  // A loaded machine may have stalled it before (nobody blamed): the fault's
  // recovery is the next one.
  const int restarts_before =
      AwaitJob(job->id(),
               [](const auto& j) {
                 return j.status().checkpoint_step() >= kEvery || Ended(j);
               })
          .status()
          .restarts();

  const int hung = WorkerOfRank(job->id(), 1);
  ASSERT_GE(hung, 0);
  const pid_t hung_task = TaskProcessOf(hung);
  ASSERT_GT(hung_task, 0);
  const absl::Time fault = absl::Now();
  kill(hung_task, SIGSTOP);
  const chimera::v1::Job lost = AwaitJob(job->id(), [&](const auto& j) {
    return j.status().restarts() > restarts_before || Ended(j);
  });
  std::cout << "the hang was found "
            << absl::FormatDuration(absl::Now() - fault)
            << " after the task stopped (--progress-timeout "
            << kProgressTimeoutSeconds << "): " << lost.status().restart_cause()
            << "\n";
  const std::string worker = absl::StrCat("worker w", hung);
  EXPECT_THAT(lost.status().restart_cause(),
              ::testing::HasSubstr(absl::StrCat("rank 1 on ", worker, " (")));
  EXPECT_THAT(lost.status().restart_cause(),
              ::testing::HasSubstr("; its process is stopped)"));
  EXPECT_THAT(
      lost.status().restart_cause(),
      ::testing::HasSubstr(absl::StrCat("the job leaves out ", worker)));

  const chimera::v1::Job on_three = AwaitJob(job->id(), [](const auto& j) {
    return (j.status().state() == chimera::v1::JOB_STATE_RUNNING &&
            j.status().completed_steps() > j.status().checkpoint_step()) ||
           Ended(j);
  });
  ASSERT_EQ(on_three.status().state(), chimera::v1::JOB_STATE_RUNNING)
      << on_three.status().message();
  std::cout << "training again on 3 workers "
            << absl::FormatDuration(absl::Now() - fault)
            << " after the task stopped\n";
  EXPECT_EQ(on_three.plan().width() * on_three.plan().depth(), 3);
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_NE(WorkerOfRank(job->id(), rank), hung) << "rank " << rank;
  }

  const chimera::v1::Job done = AwaitJob(job->id(), Ended);
  ASSERT_EQ(done.status().state(), chimera::v1::JOB_STATE_SUCCEEDED)
      << done.status().message();
  ASSERT_EQ(done.status().left_out_workers_size(), 1) << Recoveries(done);
  EXPECT_EQ(done.status().left_out_workers(0).worker_id(),
            absl::StrCat("w", hung));
  // Its status keeps the recovery for describe and logs.
  ASSERT_EQ(done.status().recoveries_size(), restarts_before + 1)
      << Recoveries(done);
  const chimera::v1::JobRecovery& recovery =
      done.status().recoveries(restarts_before);
  EXPECT_EQ(recovery.cause(), "stalled");
  EXPECT_EQ(recovery.reason(), lost.status().restart_cause());
  EXPECT_EQ(recovery.from_plan(), "chimera W=1 D=4 on 4 workers");
  EXPECT_THAT(recovery.to_plan(), ::testing::HasSubstr(" on 3 workers"));
  EXPECT_GE(recovery.checkpoint_step(), kEvery);
  EXPECT_GT(recovery.seconds_not_training(), 0);
  ExpectWeightsOfAnUninterruptedRun(manifest, job->id());
}

// One rank of an elastic job that replaces stragglers is slowed down (its
// task stopped 7/8 of the time): it is found straggling within 15 steps,
// and the job goes on without its worker, ending with the weights of an
// uninterrupted run.
TEST_F(CheckpointChaosTest,
       AStragglerIsReplacedAndTheJobEndsWithTheWeightsOfAnUninterruptedRun) {
  constexpr int kSteps = 32;
  constexpr int kEvery = 4;
  StartCoordinator();
  StartWorkers(4);
  ASSERT_TRUE(AwaitIdleWorkers(4));
  chimera::v1::TrainJob manifest = ElasticJob(kSteps, kEvery, 2);
  manifest.mutable_spec()->mutable_run_policy()->set_replace_stragglers(true);
  absl::StatusOr<chimera::v1::Job> job = client_->Submit(manifest);
  ASSERT_TRUE(job.ok()) << job.status();
  AwaitJob(job->id(), [](const auto& j) {
    return j.status().completed_steps() >= 2 || Ended(j);
  });

  const int slowed = WorkerOfRank(job->id(), 1);
  ASSERT_GE(slowed, 0);
  const pid_t slowed_task = TaskProcessOf(slowed);
  ASSERT_GT(slowed_task, 0);
  // The first step the slowdown can touch: the one under way.
  const absl::StatusOr<chimera::v1::Job> before = client_->Get(job->id());
  ASSERT_TRUE(before.ok()) << before.status();
  const int slow_from = before->status().completed_steps();
  // Stopped 7/8 of the time: its ops take about 8x as long, far above the
  // 1.5x that makes a straggler even where the tests running beside this
  // one slow its peers down too (at 3/4, 4x, a step of a loaded host now
  // and then fell under it and broke the streak). The cycle is short
  // against an op (a few ms each on a fast BLAS core): with 40 ms cycles,
  // ops that fell in a running window ran at full speed, and steps slowed
  // so unevenly that five slow ones in a row took up to 30 steps.
  std::optional<Throttle> throttle(
      std::in_place, slowed_task, absl::Milliseconds(8), absl::Milliseconds(7));
  const chimera::v1::Job replaced = AwaitJob(job->id(), [](const auto& j) {
    return j.status().restarts() > 0 || Ended(j);
  });
  throttle.reset();
  const std::string& cause = replaced.status().restart_cause();
  std::cout << "straggler: " << cause << "\n";
  EXPECT_THAT(cause, ::testing::HasSubstr(absl::StrCat("rank 1 on worker w",
                                                       slowed, " straggles")));
  EXPECT_THAT(cause,
              ::testing::HasSubstr("the job leaves out its worker from now on "
                                   "(spec.runPolicy.replaceStragglers)"));
  int since = -1;
  const size_t at = cause.find("since step ");
  ASSERT_NE(at, std::string::npos);
  ASSERT_TRUE(absl::SimpleAtoi(
      cause.substr(at + 11,
                   cause.find_first_not_of("0123456789", at + 11) - (at + 11)),
      &since));
  // Found with its fifth slow step in a row: step since + 4, the
  // (since + 5 - slow_from)th since the slowdown began; none of them before
  // it. On a loaded two-core host a step now and then still falls under the
  // threshold (the checkpoint written every 4 steps competes for the cores
  // of the ranks' peers), and each such step starts the five over: allow
  // two of them.
  const int steps_to_find = since + 5 - slow_from;
  std::cout << "found straggling " << steps_to_find
            << " steps after the slowdown began\n";
  EXPECT_GE(since, slow_from);
  EXPECT_LE(steps_to_find, 15);

  const chimera::v1::Job done = AwaitJob(job->id(), Ended);
  ASSERT_EQ(done.status().state(), chimera::v1::JOB_STATE_SUCCEEDED)
      << done.status().message();
  EXPECT_EQ(done.plan().width() * done.plan().depth(), 3);
  ASSERT_EQ(done.status().left_out_workers_size(), 1) << Recoveries(done);
  EXPECT_EQ(done.status().left_out_workers(0).worker_id(),
            absl::StrCat("w", slowed));
  ASSERT_EQ(done.status().recoveries_size(), 1);
  EXPECT_EQ(done.status().recoveries(0).cause(), "straggler");
  ExpectWeightsOfAnUninterruptedRun(manifest, job->id());
}

// A job that may shrink to 3 of its 4 workers loses two: it fails, naming
// what it lost and what it needs, rather than wait for ever.
TEST_F(CheckpointChaosTest,
       AnElasticJobLeftWithFewerThanMinWorkersFailsSayingSo) {
  StartCoordinator("127.0.0.1:0", {"--readopt-timeout", "1"});
  StartWorkers(4);
  ASSERT_TRUE(AwaitIdleWorkers(4));
  absl::StatusOr<chimera::v1::Job> job =
      client_->Submit(ElasticJob(1000, 2, 3));
  ASSERT_TRUE(job.ok()) << job.status();
  AwaitJob(job->id(), [](const auto& j) {
    return j.status().completed_steps() > 0 || Ended(j);
  });
  for (int rank : {1, 2}) {
    const int worker = WorkerOfRank(job->id(), rank);
    ASSERT_GE(worker, 0);
    KillWithItsTask(worker);
  }
  const chimera::v1::Job failed = AwaitJob(job->id(), Ended);
  EXPECT_EQ(failed.status().state(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_THAT(failed.status().message(),
              ::testing::HasSubstr("stopped sending heartbeats"));
  EXPECT_THAT(failed.status().message(),
              ::testing::HasSubstr(
                  "2 cpu workers are left and spec.resources.minWorkers is 3"));
}

// Each worker writing checkpoints to a root of its own made every restart
// fail for good, each rank finding only its own stages ("no file holds
// block 0"). Such a job now fails before its first step, saying why.
TEST_F(CheckpointChaosTest, WorkersWhoseCheckpointRootsAreNotSharedFailTheJobAtOnce) {
  StartCoordinator();
  for (const char* root : {"/root-a", "/root-b"}) {
    std::filesystem::create_directories(dir_.path() + root);
    StartWorkers(1, "", dir_.path() + root);
  }
  ASSERT_TRUE(AwaitIdleWorkers(2));
  absl::StatusOr<chimera::v1::Job> job =
      client_->Submit(Checkpointed(TwoStageJob(50), 5, 2));
  ASSERT_TRUE(job.ok()) << job.status();
  const chimera::v1::Job failed = AwaitJob(job->id(), Ended);
  EXPECT_EQ(failed.status().state(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_EQ(failed.status().restarts(), 0) << "a retry cannot cure it";
  EXPECT_EQ(failed.status().completed_steps(), 0);
  EXPECT_THAT(failed.status().message(),
              ::testing::HasSubstr(
                  "rank 1 does not see the checkpoint directory 'checkpoints/"));
  EXPECT_THAT(failed.status().message(),
              ::testing::HasSubstr("every worker's --checkpoint-root must be "
                                   "the same shared file system"));
}

}  // namespace
}  // namespace chimera
