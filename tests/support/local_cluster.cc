#include "tests/support/local_cluster.h"

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "coordinator/job_states.h"
#include "jobspec/job_file.h"
#include "tests/support/worker_process.h"

namespace chimera::testing {
namespace {

constexpr char kHeartbeatPeriod[] = "0.5";
constexpr char kFailureThreshold[] = "6";
constexpr absl::Duration kPollInterval = absl::Milliseconds(100);

}  // namespace

bool Ended(const chimera::v1::Job& job) {
  return coordinator::IsTerminal(job.status().state());
}

void LocalClusterTest::StartCoordinator(
    const std::string& listen, const std::vector<std::string>& more_flags) {
  std::vector<std::string> flags = {
      "--db", dir_.path() + "/jobs.db", "--heartbeat-period", kHeartbeatPeriod,
      "--heartbeat-failure-threshold", kFailureThreshold};
  flags.insert(flags.end(), more_flags.begin(), more_flags.end());
  absl::StatusOr<CoordinatorProcess> coordinator =
      CoordinatorProcess::Start(CHIMERA_COORDINATOR_BINARY, flags, listen);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  coordinator_ = *std::move(coordinator);
  client::ConnectionOptions options;
  options.address = coordinator_->address();
  client_ = *client::CoordinatorClient::Connect(options);
}

void LocalClusterTest::StopCoordinator() { EXPECT_EQ(coordinator_->Stop(), 0); }

std::string LocalClusterTest::KillCoordinator() {
  const std::string address = coordinator_->address();
  coordinator_->process().Signal(SIGKILL);
  coordinator_->process().Wait(absl::Seconds(10));
  return address;
}

std::unique_ptr<net::ChildProcess> LocalClusterTest::StartWorker(
    int index, const std::string& data_root,
    const std::string& checkpoint_root) {
  std::vector<std::string> flags = {
      "--data-root", data_root.empty() ? CHIMERA_SOURCE_DIR : data_root,
      "--checkpoint-root",
      checkpoint_root.empty() ? dir_.path() : checkpoint_root};
  if (node_per_worker_) {
    flags.insert(flags.end(), {"--node", absl::StrCat("node-", index)});
  }
  return StartWorkerDaemon(
      {.binary = CHIMERA_WORKER_BINARY,
       .coordinator = coordinator_->address(),
       .worker_id = absl::StrCat("w", index),
       .work_dir = absl::StrCat(dir_.path(), "/w", index),
       .flags = std::move(flags),
       .log_file = absl::StrCat(dir_.path(), "/w", index, ".log")});
}

void LocalClusterTest::StartWorkers(int count, const std::string& data_root,
                                    const std::string& checkpoint_root) {
  for (int i = 0; i < count; ++i) {
    workers_.push_back(StartWorker(static_cast<int>(workers_.size()),
                                   data_root, checkpoint_root));
  }
}

void LocalClusterTest::RestartWorker(int index) {
  workers_.at(index) = StartWorker(index, "", "");
}

int LocalClusterTest::WorkerOfRank(const std::string& id, int rank) {
  const absl::StatusOr<std::vector<chimera::v1::WorkerInfo>> workers =
      client_->Workers();
  EXPECT_TRUE(workers.ok()) << workers.status();
  if (!workers.ok()) return -1;
  for (const auto& worker : *workers) {
    int index = -1;
    if (worker.job_id() == id && worker.rank() == rank &&
        absl::SimpleAtoi(absl::StripPrefix(worker.worker_id(), "w"), &index)) {
      return index;
    }
  }
  return -1;
}

pid_t LocalClusterTest::TaskProcessOf(int index) {
  const std::string parent = absl::StrCat(Worker(index).pid());
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::ifstream status(entry.path() / "status");
    std::string line;
    while (std::getline(status, line)) {
      absl::string_view rest = line;
      if (!absl::ConsumePrefix(&rest, "PPid:")) continue;
      pid_t pid = -1;
      if (absl::StripAsciiWhitespace(rest) == parent &&
          absl::SimpleAtoi(entry.path().filename().string(), &pid)) {
        return pid;
      }
      break;
    }
  }
  return -1;
}

chimera::v1::Job LocalClusterTest::AwaitJob(
    const std::string& id,
    const std::function<bool(const chimera::v1::Job&)>& predicate,
    absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<chimera::v1::Job> job = client_->Get(id);
  while ((!job.ok() || !predicate(*job)) && absl::Now() < deadline) {
    absl::SleepFor(kPollInterval);
    job = client_->Get(id);
  }
  EXPECT_TRUE(job.ok()) << job.status();
  return job.ok() ? *job : chimera::v1::Job{};
}

chimera::v1::Job LocalClusterTest::AwaitState(const std::string& id,
                                              chimera::v1::JobState state) {
  return AwaitJob(
      id, [state](const auto& job) { return job.status().state() == state; });
}

bool LocalClusterTest::AwaitIdleWorkers(int count) {
  const absl::Time deadline = absl::Now() + kWorkersStartTimeout;
  while (absl::Now() < deadline) {
    absl::StatusOr<std::vector<chimera::v1::WorkerInfo>> workers =
        client_->Workers();
    int idle = 0;
    if (workers.ok()) {
      for (const auto& worker : *workers) {
        idle += worker.state() == chimera::v1::WORKER_STATE_IDLE;
      }
    }
    if (idle >= count) return true;
    absl::SleepFor(kPollInterval);
  }
  return false;
}

std::map<int, double> LocalClusterTest::Losses(const std::string& id) {
  std::map<int, double> by_step;
  EXPECT_TRUE(client_
                  ->Watch(id, false,
                          [&by_step](const chimera::v1::JobEvent& event) {
                            if (event.has_step())
                              by_step[event.step().step()] =
                                  event.step().loss();
                          })
                  .ok());
  return by_step;
}

chimera::v1::TrainJob LocalClusterTest::ChimeraJob(int steps) {
  absl::StatusOr<chimera::v1::TrainJob> job = jobspec::LoadJobFile(
      std::string(CHIMERA_SOURCE_DIR) + "/examples/chimera.yaml",
      chimera::jobspec::SpecOnly());
  EXPECT_TRUE(job.ok()) << job.status();
  job->mutable_spec()->mutable_training()->set_max_steps(steps);
  return *job;
}

chimera::v1::TrainJob LocalClusterTest::TwoStageJob(int steps) {
  chimera::v1::TrainJob job = ChimeraJob(steps);
  chimera::v1::JobSpec& spec = *job.mutable_spec();
  spec.mutable_parallelism()->set_schedule("1f1b");
  spec.mutable_parallelism()->set_pipeline(2);
  spec.mutable_parallelism()->set_micro_batches(2);
  spec.mutable_training()->set_global_batch_size(4);
  spec.mutable_resources()->set_workers(2);
  return job;
}

}  // namespace chimera::testing
