// LocalClusterTest: a fixture with a real chimera-coordinator process and
// real chimera-worker daemons on loopback, for the tests that run jobs end
// to end and break them: kill or stop the coordinator, a daemon or a task.
// Everything lives in the test's own directory: the job store, each
// worker's work directory and log (w<i>.log), and the workers' checkpoint
// root.
//
//   TEST_F(LocalClusterTest, JobSucceeds) {
//     StartCoordinator();
//     StartWorkers(4);
//     const std::string id = client_->Submit(ChimeraJob(15))->id();
//     EXPECT_EQ(AwaitState(id, chimera::v1::JOB_STATE_SUCCEEDED)...);
//   }
#ifndef CHIMERA_TESTS_SUPPORT_LOCAL_CLUSTER_H_
#define CHIMERA_TESTS_SUPPORT_LOCAL_CLUSTER_H_

#include <gtest/gtest.h>
#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "chimera/v1/service.pb.h"
#include "client/coordinator_client.h"
#include "net/child_process.h"
#include "tests/support/coordinator_process.h"
#include "tests/support/temp_dir.h"

namespace chimera::testing {

inline constexpr absl::Duration kWorkersStartTimeout = absl::Seconds(30);
inline constexpr absl::Duration kJobTimeout = absl::Seconds(180);

bool Ended(const chimera::v1::Job& job);

class LocalClusterTest : public ::testing::Test {
 protected:
  // Starts the coordinator on `listen` with heartbeats every 0.5 s, dead
  // after 6 missed (3 s, with room for a busy 2-core machine), and
  // `more_flags`; connects client_ to it.
  void StartCoordinator(const std::string& listen = "127.0.0.1:0",
                        const std::vector<std::string>& more_flags = {});
  void StopCoordinator();
  // kill -9 the coordinator; returns the address it served on.
  std::string KillCoordinator();

  // Workers w<n>, w<n+1>, ... reading data under `data_root` (the source
  // tree, for the example corpus, by default) and writing checkpoints under
  // `checkpoint_root` (the test's directory by default).
  void StartWorkers(int count, const std::string& data_root = "",
                    const std::string& checkpoint_root = "");
  // Starts worker w<index> again after it died.
  void RestartWorker(int index);
  // The worker named w<index>'s daemon process.
  net::ChildProcess& Worker(int index) { return *workers_.at(index); }
  // The index of the worker running `rank` of job `id`; -1 if none is.
  int WorkerOfRank(const std::string& id, int rank);
  // The task process the daemon of worker `index` runs; -1 if none.
  pid_t TaskProcessOf(int index);

  // Polls until `predicate` holds for the job or `timeout` passes; the job
  // as it last was.
  chimera::v1::Job AwaitJob(
      const std::string& id,
      const std::function<bool(const chimera::v1::Job&)>& predicate,
      absl::Duration timeout = kJobTimeout);
  chimera::v1::Job AwaitState(const std::string& id,
                              chimera::v1::JobState state);
  // Waits until `count` workers are registered and idle.
  bool AwaitIdleWorkers(int count);
  // Each step's loss as the job recorded it (a step run twice: its last run).
  std::map<int, double> Losses(const std::string& id);

  // The example Chimera job (D = 4) with `steps` steps.
  chimera::v1::TrainJob ChimeraJob(int steps);
  // The example's model on two 1F1B stages.
  chimera::v1::TrainJob TwoStageJob(int steps);

  chimera::testing::TempDir dir_;
  // Workers started from now on name a node of their own (--node node-<i>):
  // the planner counts each one's cores as its own, as on a cluster, rather
  // than shared by every worker of the host.
  bool node_per_worker_ = false;
  std::optional<CoordinatorProcess> coordinator_;
  std::unique_ptr<client::CoordinatorClient> client_;

 private:
  std::unique_ptr<net::ChildProcess> StartWorker(
      int index, const std::string& data_root,
      const std::string& checkpoint_root);

  std::vector<std::unique_ptr<net::ChildProcess>> workers_;
};

}  // namespace chimera::testing

#endif  // CHIMERA_TESTS_SUPPORT_LOCAL_CLUSTER_H_
