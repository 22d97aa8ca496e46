// The job lifecycle as a table: every (state, event) pair either moves the
// job as job_manager.h's diagram draws it or is refused naming both; what a
// restart, a wait, a start and an end do to the rest of the status.
#include "coordinator/job_state_machine.h"

#include <map>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chimera::coordinator {
namespace {

using chimera::v1::Job;
using chimera::v1::JobState;
using Kind = JobEvent::Kind;
using ::testing::HasSubstr;

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);

constexpr JobState kAllStates[] = {
    chimera::v1::JOB_STATE_UNSPECIFIED, chimera::v1::JOB_STATE_PENDING,
    chimera::v1::JOB_STATE_RUNNING,     chimera::v1::JOB_STATE_SUCCEEDED,
    chimera::v1::JOB_STATE_FAILED,      chimera::v1::JOB_STATE_STOPPED};

// A job in `state` that may restart `backoff_limit` times, has restarted
// `restarts` times and checkpoints every 5 steps.
Job JobIn(JobState state, int restarts = 0, int backoff_limit = 1) {
  Job job;
  job.set_id("job-1");
  auto* spec = job.mutable_manifest()->mutable_spec();
  spec->mutable_training()->set_max_steps(100);
  spec->mutable_training()->set_checkpoint_every(5);
  spec->mutable_run_policy()->set_backoff_limit(backoff_limit);
  job.mutable_status()->set_state(state);
  job.mutable_status()->set_restarts(restarts);
  job.mutable_plan()->set_scheme("chimera");
  return job;
}

JobEvent EventOf(Kind kind) {
  JobEvent event;
  event.kind = kind;
  event.reason = "a reason";
  return event;
}

// The diagram: where each arrow leads (with restarts left); every pair not
// listed has no arrow.
const std::map<std::pair<JobState, Kind>, JobState>& Arrows() {
  static const auto* arrows = new std::map<std::pair<JobState, Kind>, JobState>{
      {{chimera::v1::JOB_STATE_UNSPECIFIED, Kind::kSubmitted},
       chimera::v1::JOB_STATE_PENDING},
      {{chimera::v1::JOB_STATE_PENDING, Kind::kWaiting},
       chimera::v1::JOB_STATE_PENDING},
      {{chimera::v1::JOB_STATE_PENDING, Kind::kStarted},
       chimera::v1::JOB_STATE_RUNNING},
      {{chimera::v1::JOB_STATE_PENDING, Kind::kFailed},
       chimera::v1::JOB_STATE_FAILED},
      {{chimera::v1::JOB_STATE_PENDING, Kind::kStopRequested},
       chimera::v1::JOB_STATE_STOPPED},
      {{chimera::v1::JOB_STATE_RUNNING, Kind::kSucceeded},
       chimera::v1::JOB_STATE_SUCCEEDED},
      {{chimera::v1::JOB_STATE_RUNNING, Kind::kFailed},
       chimera::v1::JOB_STATE_FAILED},
      {{chimera::v1::JOB_STATE_RUNNING, Kind::kRunLost},
       chimera::v1::JOB_STATE_PENDING},
      {{chimera::v1::JOB_STATE_RUNNING, Kind::kStopRequested},
       chimera::v1::JOB_STATE_STOPPED},
      {{chimera::v1::JOB_STATE_RUNNING, Kind::kGrowing},
       chimera::v1::JOB_STATE_PENDING},
  };
  return *arrows;
}

TEST(JobStateMachineTest, EveryStateAndEventMovesAsTheDiagramDrawsOrIsRefused) {
  for (JobState state : kAllStates) {
    for (Kind kind : JobEvent::kAllKinds) {
      const std::string pair = absl::StrCat(chimera::v1::JobState_Name(state),
                                            " + ", KindName(kind));
      const absl::StatusOr<Job> next =
          Transition(JobIn(state), EventOf(kind), kNow);
      const auto arrow = Arrows().find({state, kind});
      if (arrow == Arrows().end()) {
        EXPECT_EQ(next.status().code(), absl::StatusCode::kFailedPrecondition)
            << pair;
        EXPECT_THAT(next.status().message(), HasSubstr(KindName(kind))) << pair;
        continue;
      }
      ASSERT_TRUE(next.ok()) << pair << ": " << next.status();
      EXPECT_EQ(next->status().state(), arrow->second) << pair;
      const bool ended = arrow->second == chimera::v1::JOB_STATE_SUCCEEDED ||
                         arrow->second == chimera::v1::JOB_STATE_FAILED ||
                         arrow->second == chimera::v1::JOB_STATE_STOPPED;
      EXPECT_EQ(next->status().end_time() > 0, ended) << pair;
      EXPECT_EQ(next->id(), "job-1") << pair;
    }
  }
}

TEST(JobStateMachineTest, ARunLostWithNoRestartLeftFailsTheJobWithItsReason) {
  const absl::StatusOr<Job> failed = Transition(
      JobIn(chimera::v1::JOB_STATE_RUNNING, 1, 1),
      JobEvent::RunLost("worker w3 (rank 3) stopped sending heartbeats",
                        RecoveryCause::kWorkerLost),
      kNow);
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(failed->status().state(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_EQ(failed->status().message(),
            "worker w3 (rank 3) stopped sending heartbeats");
  EXPECT_EQ(failed->status().restarts(), 1);
}

TEST(JobStateMachineTest, ARestartQueuesTheJobFromItsCheckpointWithoutItsPlan) {
  Job running = JobIn(chimera::v1::JOB_STATE_RUNNING, 0, 2);
  running.mutable_status()->set_completed_steps(13);
  running.mutable_status()->set_checkpoint_step(10);
  const absl::StatusOr<Job> queued = Transition(
      running,
      JobEvent::RunLost("worker w1 (rank 1) died", RecoveryCause::kWorkerLost),
      kNow);
  ASSERT_TRUE(queued.ok()) << queued.status();
  const chimera::v1::JobStatus& status = queued->status();
  EXPECT_EQ(status.state(), chimera::v1::JOB_STATE_PENDING);
  EXPECT_EQ(status.restarts(), 1);
  EXPECT_EQ(status.completed_steps(), 10) << "steps after it run again";
  EXPECT_EQ(status.restart_cause(), "worker w1 (rank 1) died");
  EXPECT_FALSE(queued->has_plan()) << "planned again for its next workers";
  ASSERT_EQ(status.recoveries_size(), 1) << "the history has the lost run";
  EXPECT_EQ(status.recoveries(0).cause(), "worker_lost");
  EXPECT_EQ(status.recoveries(0).reason(), "worker w1 (rank 1) died");
  EXPECT_EQ(status.recoveries(0).checkpoint_step(), 10);
  EXPECT_THAT(status.recoveries(0).from_plan(), HasSubstr("chimera"));
  EXPECT_EQ(status.message(),
            "worker w1 (rank 1) died; restarting from its latest complete "
            "checkpoint (step 10 or later) (restart 1 of 2)");
}

chimera::v1::WorkerIncarnation Incarnation(const std::string& id,
                                           uint64_t incarnation) {
  chimera::v1::WorkerIncarnation worker;
  worker.set_worker_id(id);
  worker.set_incarnation(incarnation);
  return worker;
}

TEST(JobStateMachineTest, AHungWorkerIsLeftOutOnceWithItsLatestIncarnation) {
  Job job = JobIn(chimera::v1::JOB_STATE_RUNNING, 0, 3);
  for (const auto& hung :
       {Incarnation("w1", 7), Incarnation("w2", 8), Incarnation("w1", 9)}) {
    absl::StatusOr<Job> queued = Transition(
        job, JobEvent::RunLost("stalled", RecoveryCause::kStalled, {hung}),
        kNow);
    ASSERT_TRUE(queued.ok()) << queued.status();
    queued->mutable_status()->set_state(chimera::v1::JOB_STATE_RUNNING);
    job = *std::move(queued);
  }
  const auto& left_out = job.status().left_out_workers();
  ASSERT_EQ(left_out.size(), 2);
  EXPECT_EQ(left_out[0].worker_id(), "w1");
  EXPECT_EQ(left_out[0].incarnation(), 9u);
  EXPECT_EQ(left_out[1].worker_id(), "w2");
  // A failed job keeps them too: its status says whom it blamed.
  job.mutable_status()->set_restarts(3);
  const absl::StatusOr<Job> failed =
      Transition(job,
                 JobEvent::RunLost("stalled", RecoveryCause::kStalled,
                                   {Incarnation("w3", 1)}),
                 kNow);
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(failed->status().state(), chimera::v1::JOB_STATE_FAILED);
  EXPECT_EQ(failed->status().left_out_workers_size(), 3);
}

TEST(JobStateMachineTest,
     GrowingQueuesTheJobFromItsCheckpointWithoutCountingARestart) {
  Job running = JobIn(chimera::v1::JOB_STATE_RUNNING, 1, 2);
  running.mutable_status()->set_completed_steps(13);
  running.mutable_status()->set_checkpoint_step(12);
  const absl::StatusOr<Job> queued = Transition(
      running, JobEvent::Growing("growing from 3 to 4 workers"), kNow);
  ASSERT_TRUE(queued.ok()) << queued.status();
  EXPECT_EQ(queued->status().state(), chimera::v1::JOB_STATE_PENDING);
  EXPECT_EQ(queued->status().restarts(), 1) << "a growth is no restart";
  EXPECT_EQ(queued->status().completed_steps(), 12);
  EXPECT_EQ(queued->status().restart_cause(), "growing from 3 to 4 workers");
  EXPECT_FALSE(queued->has_plan());
  ASSERT_EQ(queued->status().recoveries_size(), 1);
  EXPECT_EQ(queued->status().recoveries(0).cause(), "grow");
}

TEST(JobStateMachineTest, AWaitIsWordedAfterTheRestartsCauseAndReplacedByTheNext) {
  absl::StatusOr<Job> job = Transition(
      JobIn(chimera::v1::JOB_STATE_RUNNING, 0, 1),
      JobEvent::RunLost("worker w1 (rank 1) died", RecoveryCause::kWorkerLost),
      kNow);
  ASSERT_TRUE(job.ok());
  job = Transition(*job, JobEvent::Waiting("needs 4 idle cpu workers"), kNow);
  ASSERT_TRUE(job.ok());
  job = Transition(*job, JobEvent::Waiting("planning for 4 idle cpu workers"), kNow);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->status().waiting_for(), "planning for 4 idle cpu workers");
  EXPECT_EQ(job->status().message(),
            "worker w1 (rank 1) died; restarting from its latest complete "
            "checkpoint (step 0 or later) (restart 1 of 1); waiting: planning "
            "for 4 idle cpu workers");

  const absl::StatusOr<Job> fresh =
      Transition(JobIn(chimera::v1::JOB_STATE_PENDING),
                 JobEvent::Waiting("needs 2 idle gpu workers"), kNow);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->status().message(), "waiting: needs 2 idle gpu workers");
}

TEST(JobStateMachineTest, AStartClearsTheWaitAndKeepsTheFirstStartTime) {
  Job pending = JobIn(chimera::v1::JOB_STATE_PENDING);
  pending.mutable_status()->set_waiting_for("needs 4 idle cpu workers");
  pending.mutable_status()->set_message("waiting: needs 4 idle cpu workers");
  absl::StatusOr<Job> started = Transition(pending, JobEvent::Started(), kNow);
  ASSERT_TRUE(started.ok());
  EXPECT_EQ(started->status().message(), "");
  EXPECT_EQ(started->status().waiting_for(), "");
  EXPECT_EQ(started->status().start_time(), 1'800'000'000);

  // A restart keeps the first start: the deadline counts from it.
  pending.mutable_status()->set_start_time(1'700'000'000);
  started = Transition(pending, JobEvent::Started(), kNow);
  ASSERT_TRUE(started.ok());
  EXPECT_EQ(started->status().start_time(), 1'700'000'000);
}

TEST(JobStateMachineTest, SuccessCountsEveryStepAndAStopSaysWhetherItHadStarted) {
  const absl::StatusOr<Job> done = Transition(
      JobIn(chimera::v1::JOB_STATE_RUNNING), JobEvent::Succeeded(), kNow);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->status().completed_steps(), 100);
  EXPECT_EQ(done->status().message(), "");

  EXPECT_EQ(Transition(JobIn(chimera::v1::JOB_STATE_RUNNING),
                       JobEvent::StopRequested(), kNow)
                ->status()
                .message(),
            "stopped on request");
  EXPECT_EQ(Transition(JobIn(chimera::v1::JOB_STATE_PENDING),
                       JobEvent::StopRequested(), kNow)
                ->status()
                .message(),
            "stopped on request before it started");
}

TEST(JobStateMachineTest, AnEndedJobNeverMovesAgainAndTheRefusalNamesTheState) {
  const absl::StatusOr<Job> moved = Transition(
      JobIn(chimera::v1::JOB_STATE_SUCCEEDED), JobEvent::Started(), kNow);
  EXPECT_EQ(moved.status(),
            absl::FailedPreconditionError(
                "a SUCCEEDED job cannot take the event Started"));
}

}  // namespace
}  // namespace chimera::coordinator
