// A running job's decisions, read from the run alone: when it is overdue
// and why (a held failure, a late rendezvous, its deadline, a stalled
// rank, named with the op it is in, and the rank that holds the others up
// left out), which ranks did not come back after a coordinator restart, and a
// coordinator's own silence counted against nobody; what rank 0's store and
// a rank's end mean for the run, and the trace it holds.
#include "coordinator/job_run.h"

#include <map>
#include <optional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chimera::coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const absl::Time kStart = absl::FromUnixSeconds(1000);
const RunBounds kBounds{absl::Seconds(60), absl::Seconds(60)};
const WorkerLookup kNoWorkers = [](const std::string&) {
  return std::optional<chimera::v1::WorkerInfo>();
};

// A registry that knows workers w0 and w1 (incarnations 10 and 11) with
// their tasks at `positions` (none where the worker is missing).
WorkerLookup WorkersAt(
    std::map<std::string, chimera::v1::TaskPosition> positions) {
  return [positions](
             const std::string& id) -> std::optional<chimera::v1::WorkerInfo> {
    auto found = positions.find(id);
    if (found == positions.end()) return std::nullopt;
    chimera::v1::WorkerInfo info;
    info.set_worker_id(id);
    info.set_incarnation(id == "w0" ? 10 : 11);
    *info.mutable_task_position() = found->second;
    return info;
  };
}

chimera::v1::TaskPosition At(const std::string& op, bool waits_for_peer,
                             bool process_stopped = false) {
  chimera::v1::TaskPosition position;
  position.set_step(7);
  position.set_op(op);
  position.set_op_seconds(61.25);
  position.set_waits_for_peer(waits_for_peer);
  position.set_process_stopped(process_stopped);
  return position;
}

// A two-rank run of a job started at kStart, predicted at 1 s a step, that
// may run `deadline_seconds` (0: no deadline).
JobRun TwoRankRun(int64_t deadline_seconds = 0) {
  chimera::v1::Job job;
  job.mutable_manifest()->mutable_spec()->mutable_training()->set_max_steps(10);
  job.mutable_manifest()->mutable_spec()->mutable_run_policy()->set_active_deadline_seconds(
      deadline_seconds);
  job.mutable_status()->set_start_time(absl::ToUnixSeconds(kStart));
  chimera::v1::Plan plan;
  plan.mutable_prediction()->set_iteration_seconds(1);
  JobRun run = JobRun::For(job, plan, 2, kStart, kStart);
  run.worker_of_rank = {"w0", "w1"};
  return run;
}

// Both ranks of a run past its rendezvous, silent for longer than kBounds.
std::optional<RunVerdict> StallOf(const WorkerLookup& workers) {
  JobRun run = TwoRankRun();
  run.rendezvous_done = true;
  return run.Overdue(kStart + absl::Seconds(61), kBounds, workers);
}

TEST(JobRunTest, ARunWaitsForItsRendezvousUntilTheTimeout) {
  const JobRun run = TwoRankRun();
  EXPECT_FALSE(run.Overdue(kStart + absl::Seconds(60), kBounds, kNoWorkers));
  const std::optional<RunVerdict> late =
      run.Overdue(kStart + absl::Seconds(61), kBounds, kNoWorkers);
  ASSERT_TRUE(late);
  EXPECT_EQ(late->reason, "rank 0 did not report its rendezvous store within 1m");
  EXPECT_TRUE(late->retryable);
}

TEST(JobRunTest, ARankWithoutAStepForTheBoundHasStalledAndIsNamed) {
  JobRun run = TwoRankRun();
  run.rendezvous_done = true;
  run.last_progress[0] = kStart + absl::Seconds(100);
  // The bound: the larger of 60 s and 10 predicted steps (10 s).
  EXPECT_FALSE(run.Overdue(kStart + absl::Seconds(60), kBounds, kNoWorkers));
  const std::optional<RunVerdict> stalled =
      run.Overdue(kStart + absl::Seconds(61), kBounds, kNoWorkers);
  ASSERT_TRUE(stalled);
  EXPECT_THAT(stalled->reason,
              HasSubstr("rank 1 on worker w1 reported no step for 1m"));
  EXPECT_THAT(stalled->reason, Not(HasSubstr("rank 0")));
  EXPECT_TRUE(stalled->retryable);
  // A rank that is done owes no step.
  run.rank_done[1] = true;
  EXPECT_FALSE(run.Overdue(kStart + absl::Seconds(61), kBounds, kNoWorkers));
}

TEST(JobRunTest,
     AStalledRankNamesTheOpItIsInAndTheRankThatHoldsTheOthersUpIsLeftOut) {
  const std::optional<RunVerdict> stalled = StallOf(
      WorkersAt({{"w0", At("RECV_GRAD chunk=0 stage=0 mb=1 peer=1", true)},
                 {"w1", At("FORWARD chunk=0 stage=1 mb=2", false)}}));
  ASSERT_TRUE(stalled);
  EXPECT_THAT(stalled->reason,
              HasSubstr("rank 0 on worker w0 (waiting in RECV_GRAD chunk=0 "
                        "stage=0 mb=1 peer=1 of step 7 for 61.2 s), rank 1 on "
                        "worker w1 (in FORWARD chunk=0 stage=1 mb=2 of step 7 "
                        "for 61.2 s) reported no step for 1m"));
  EXPECT_THAT(stalled->reason,
              HasSubstr("the job leaves out worker w1 from now on"));
  EXPECT_EQ(stalled->cause, RecoveryCause::kStalled);
  ASSERT_EQ(stalled->left_out_workers.size(), 1u);
  EXPECT_EQ(stalled->left_out_workers[0].worker_id(), "w1");
  EXPECT_EQ(stalled->left_out_workers[0].incarnation(), 11u);
}

TEST(JobRunTest, AStoppedProcessHoldsTheOthersUpWhateverOpItIsIn) {
  const std::optional<RunVerdict> stalled = StallOf(
      WorkersAt({{"w0", At("RECV_ACT chunk=0 stage=1 mb=0 peer=0", true, true)},
                 {"w1", At("RECV_GRAD chunk=0 stage=0 mb=0 peer=1", true)}}));
  ASSERT_TRUE(stalled);
  EXPECT_THAT(stalled->reason, HasSubstr("of step 7 for 61.2 s; its process "
                                         "is stopped), rank 1"));
  ASSERT_EQ(stalled->left_out_workers.size(), 1u);
  EXPECT_EQ(stalled->left_out_workers[0].worker_id(), "w0");
}

// Its peers may go past their bound first: the stopped rank finished a step
// after them. It is blamed all the same, and only once a rank is overdue.
TEST(JobRunTest, AStoppedRankIsBlamedWhenItsPeersAreOverdueBeforeItself) {
  JobRun run = TwoRankRun();
  run.rendezvous_done = true;
  run.Stepped(0, kStart + absl::Seconds(5));
  run.Stepped(1, kStart + absl::Seconds(9));
  const WorkerLookup workers =
      WorkersAt({{"w0", At("RECV_GRAD chunk=0 stage=0 mb=1 peer=1", true)},
                 {"w1", At("FORWARD chunk=0 stage=1 mb=2", false, true)}});
  EXPECT_FALSE(run.Overdue(kStart + absl::Seconds(65), kBounds, workers));
  const std::optional<RunVerdict> stalled =
      run.Overdue(kStart + absl::Seconds(66), kBounds, workers);
  ASSERT_TRUE(stalled);
  EXPECT_THAT(stalled->reason,
              HasSubstr("rank 1 on worker w1 (in FORWARD chunk=0 stage=1 mb=2 "
                        "of step 7 for 61.2 s; its process is stopped)"));
  ASSERT_EQ(stalled->left_out_workers.size(), 1u);
  EXPECT_EQ(stalled->left_out_workers[0].worker_id(), "w1");
}

TEST(JobRunTest, RanksThatAllWaitForPeersOrSayNothingBlameNoWorker) {
  const std::optional<RunVerdict> waiting =
      StallOf(WorkersAt({{"w0", At("ALLREDUCE_END chunk=0 stage=0", true)},
                         {"w1", At("END_OF_STEP", true)}}));
  ASSERT_TRUE(waiting);
  EXPECT_TRUE(waiting->left_out_workers.empty());
  EXPECT_THAT(waiting->reason, Not(HasSubstr("leaves out")));
  // Workers that report no position (the registry lost them, or they
  // predate positions) are named without one.
  const std::optional<RunVerdict> unknown = StallOf(kNoWorkers);
  ASSERT_TRUE(unknown);
  EXPECT_TRUE(unknown->left_out_workers.empty());
  EXPECT_THAT(unknown->reason,
              HasSubstr("rank 0 on worker w0, rank 1 on worker w1 reported"));
}

// Why `run` is overdue at `at`, having been on time at `on_time`; what went
// otherwise when it was not so.
std::string OverdueReason(const JobRun& run, absl::Time on_time, absl::Time at,
                          const RunBounds& bounds) {
  if (run.Overdue(on_time, bounds, kNoWorkers)) return "overdue too early";
  const std::optional<RunVerdict> verdict = run.Overdue(at, bounds, kNoWorkers);
  return verdict ? verdict->reason : "not overdue";
}

// Its first step also connects a rank, builds its stages and loads the
// checkpoint: it may take as long as the rendezvous.
TEST(JobRunTest, ARunsFirstStepMayTakeAsLongAsTheRendezvous) {
  const RunBounds bounds{absl::Seconds(120), absl::Seconds(10)};
  JobRun run = TwoRankRun();
  run.rendezvous_done = true;
  EXPECT_THAT(OverdueReason(run, kStart + absl::Seconds(100),
                            kStart + absl::Seconds(121), bounds),
              HasSubstr("reported no step for 2m (the larger of "
                        "--progress-timeout and 10 predicted steps, or of "
                        "--rendezvous-timeout before a run's first step)"));
  run.Stepped(0, kStart + absl::Seconds(5));
  run.Stepped(1, kStart + absl::Seconds(5));
  EXPECT_THAT(OverdueReason(run, kStart + absl::Seconds(15),
                            kStart + absl::Seconds(16), bounds),
              HasSubstr("reported no step for 10s (the larger of "
                        "--progress-timeout and 10 predicted steps): stopped"));
}

TEST(JobRunTest, AHeldFailureEndsTheRunOnceItsTimeComes) {
  JobRun run = TwoRankRun();
  run.rendezvous_done = true;
  run.failure = "rank 1 on worker w1 failed: out of memory";
  run.failure_retryable = false;
  run.fail_by = kStart + absl::Seconds(3);
  EXPECT_FALSE(run.Overdue(kStart + absl::Seconds(2), kBounds, kNoWorkers));
  const std::optional<RunVerdict> failed =
      run.Overdue(kStart + absl::Seconds(3), kBounds, kNoWorkers);
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->reason, "rank 1 on worker w1 failed: out of memory");
  EXPECT_FALSE(failed->retryable);
}

TEST(JobRunTest, ThePassedDeadlineFailsTheRunForGood) {
  JobRun run = TwoRankRun(/*deadline_seconds=*/30);
  run.rendezvous_done = true;
  for (absl::Time& progress : run.last_progress) progress = kStart + absl::Seconds(29);
  const std::optional<RunVerdict> late =
      run.Overdue(kStart + absl::Seconds(30), kBounds, kNoWorkers);
  ASSERT_TRUE(late);
  EXPECT_THAT(late->reason, HasSubstr("still running 30 s after its start"));
  EXPECT_FALSE(late->retryable);
}

TEST(JobRunTest, MissingRanksAfterACoordinatorRestartAreNamedOnceTheirTimeIsUp) {
  JobRun run = TwoRankRun();
  run.worker_of_rank = {"w0", ""};
  run.readopt_by = kStart + absl::Seconds(15);
  // While it waits for them, nothing else ends it: a peer's failure would
  // blame the wrong rank.
  run.failure = "rank 0 on worker w0 failed: connection reset";
  run.fail_by = kStart;
  EXPECT_FALSE(run.Overdue(kStart + absl::Seconds(100), kBounds, kNoWorkers));
  EXPECT_FALSE(run.Unadopted(kStart + absl::Seconds(14), absl::Seconds(15)));
  EXPECT_EQ(run.Unadopted(kStart + absl::Seconds(15), absl::Seconds(15)),
            "the coordinator restarted and the worker of rank 1 did not "
            "register again within 15s");
}

TEST(JobRunTest, TheCoordinatorsOwnSilenceCountsAgainstNoRank) {
  JobRun run = TwoRankRun();
  run.rendezvous_done = true;
  run.Excuse(absl::Seconds(70));
  EXPECT_FALSE(run.Overdue(kStart + absl::Seconds(100), kBounds, kNoWorkers));
  EXPECT_TRUE(run.Overdue(kStart + absl::Seconds(131), kBounds, kNoWorkers));
}

TEST(JobRunTest, RankZerosStoreReleasesTheOtherStartsWithItsAddress) {
  JobRun run = TwoRankRun();
  run.held_starts.resize(2);
  run.held_starts[1].mutable_start()->set_rank(1);
  const absl::Time ready = kStart + absl::Seconds(5);
  const auto starts = run.ReleaseStarts("10.0.0.1:4000", ready);
  ASSERT_EQ(starts.size(), 1u) << "rank 0's went out when the run began";
  EXPECT_EQ(starts[0].first, "w1");
  EXPECT_EQ(starts[0].second.start().rank(), 1);
  EXPECT_EQ(starts[0].second.start().rendezvous().store_address(),
            "10.0.0.1:4000");
  EXPECT_TRUE(run.held_starts.empty());
  EXPECT_TRUE(run.rendezvous_done);
  // Progress is timed from the rendezvous: no rank has stalled a bound later.
  EXPECT_FALSE(run.Overdue(ready + absl::Seconds(60), kBounds, kNoWorkers));
  EXPECT_TRUE(run.Overdue(ready + absl::Seconds(61), kBounds, kNoWorkers));
}

TEST(JobRunTest, TheRunSucceedsWithItsLastRankAndHoldsTheFailureThatRecurs) {
  JobRun run = TwoRankRun();
  const RankEnd success{chimera::v1::TASK_STATE_SUCCEEDED, "", false};
  EXPECT_FALSE(run.RankEnded(0, "w0", success, kStart, absl::Seconds(3)));
  EXPECT_TRUE(run.RankEnded(1, "w1", success, kStart, absl::Seconds(3)));

  JobRun failing = TwoRankRun();
  const RankEnd lost{chimera::v1::TASK_STATE_FAILED, "connection reset", true};
  EXPECT_FALSE(failing.RankEnded(0, "w0", lost, kStart, absl::Seconds(3)));
  EXPECT_EQ(failing.failure, "rank 0 on worker w0 failed: connection reset");
  EXPECT_TRUE(failing.failure_retryable);
  EXPECT_EQ(failing.fail_by, kStart + absl::Seconds(3));
  // Its own error is why its peer lost the connection: it replaces the held
  // one, and the hold is not extended.
  const RankEnd own{chimera::v1::TASK_STATE_FAILED, std::string(5000, 'x'),
                    false};
  EXPECT_FALSE(failing.RankEnded(1, "w1", own, kStart + absl::Seconds(1),
                                 absl::Seconds(3)));
  EXPECT_THAT(*failing.failure, HasSubstr("rank 1 on worker w1 failed: xxx"));
  EXPECT_THAT(*failing.failure, HasSubstr("... (cut to 4096 bytes)"));
  EXPECT_FALSE(failing.failure_retryable);
  EXPECT_EQ(failing.fail_by, kStart + absl::Seconds(3));
}

TEST(JobRunTest, ARecoveredRunTakesBackEachRankOnceAndGoesOnWhenAllAreBack) {
  // Stored running before attempts were counted: its attempt is restarts + 1.
  chimera::v1::Job job;
  job.mutable_status()->set_state(chimera::v1::JOB_STATE_RUNNING);
  job.mutable_status()->set_restarts(1);
  job.mutable_plan()->mutable_prediction()->set_iteration_seconds(1);
  JobRun run = JobRun::Recovered(job, 2, kStart, kStart, absl::Seconds(15));
  EXPECT_EQ(run.worker_of_rank, (std::vector<std::string>{"", ""}));
  EXPECT_FALSE(run.MayAdopt(/*attempt=*/1, 0)) << "attempt 2 runs";
  EXPECT_FALSE(run.MayAdopt(2, 2)) << "no rank 2";
  ASSERT_TRUE(run.MayAdopt(2, 1));
  EXPECT_FALSE(run.Adopt(1, "w1"));
  EXPECT_FALSE(run.MayAdopt(2, 1)) << "taken";
  EXPECT_TRUE(run.Adopt(0, "w0"));
  EXPECT_FALSE(run.MayAdopt(2, 0)) << "no longer waiting";
  EXPECT_FALSE(run.Unadopted(kStart + absl::Hours(1), absl::Seconds(15)));
}

TEST(JobRunTest, OnlyTheWorkerOfARankReportsOnIt) {
  const JobRun run = TwoRankRun();
  EXPECT_TRUE(run.Runs(run.attempt, 1, "w1"));
  EXPECT_TRUE(run.Runs(std::nullopt, 0, "w0")) << "a worker without attempts";
  EXPECT_FALSE(run.Runs(run.attempt + 1, 1, "w1")) << "another attempt";
  EXPECT_FALSE(run.Runs(run.attempt, 1, "w0")) << "another rank's worker";
  EXPECT_FALSE(run.Runs(run.attempt, 2, "w1")) << "no rank 2";
  EXPECT_FALSE(run.Runs(run.attempt, -1, "w1"));
  EXPECT_TRUE(run.CheckStep(9).ok());
  EXPECT_THAT(run.CheckStep(10).message(),
              HasSubstr("metrics.step: 10 is outside the job's steps [0, 10)"));
  EXPECT_EQ(run.CheckStep(-1).code(), absl::StatusCode::kInvalidArgument);
}

TEST(JobRunTest, EndingARunStopsTheRanksStillRunningAndFreesEveryPlacedWorker) {
  JobRun run = TwoRankRun();
  run.worker_of_rank = {"w0", "w1", ""};  // Rank 2 not back after a restart.
  run.rank_done = {true, false, false};
  EXPECT_EQ(run.PlacedWorkers(), (std::vector<std::string>{"w0", "w1"}));
  const auto stops = run.StopOrders("job");
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0].first, "w1");
  EXPECT_EQ(stops[0].second.stop().job_id(), "job");
  EXPECT_EQ(stops[0].second.stop().attempt(), run.attempt);
}

TEST(JobRunTest, TheEndingEventRestartsWhatARetryMayCureAndFailsTheRest) {
  const RunBounds bounds{absl::Seconds(60), absl::Seconds(60),
                         absl::Seconds(15)};
  JobRun late = TwoRankRun();
  EXPECT_FALSE(late.Ending(kStart + absl::Seconds(60), bounds, kNoWorkers));
  const std::optional<JobEvent> lost =
      late.Ending(kStart + absl::Seconds(61), bounds, kNoWorkers);
  ASSERT_TRUE(lost);
  EXPECT_EQ(lost->kind, JobEvent::Kind::kRunLost) << lost->reason;

  JobRun failing = TwoRankRun();
  failing.rendezvous_done = true;
  failing.failure = "rank 1 on worker w1 failed: bad data";
  failing.failure_retryable = false;
  failing.fail_by = kStart;
  const std::optional<JobEvent> failed =
      failing.Ending(kStart, bounds, kNoWorkers);
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->kind, JobEvent::Kind::kFailed);
  EXPECT_EQ(failed->reason, "rank 1 on worker w1 failed: bad data");

  chimera::v1::Job job;
  job.mutable_plan()->mutable_prediction()->set_iteration_seconds(1);
  const JobRun recovered =
      JobRun::Recovered(job, 2, kStart, kStart, bounds.readopt_timeout);
  const std::optional<JobEvent> unadopted =
      recovered.Ending(kStart + absl::Seconds(15), bounds, kNoWorkers);
  ASSERT_TRUE(unadopted);
  EXPECT_EQ(unadopted->kind, JobEvent::Kind::kRunLost);
  EXPECT_THAT(unadopted->reason,
              HasSubstr("did not register again within 15s"));

  JobRun hung = TwoRankRun();
  hung.rendezvous_done = true;
  const std::optional<JobEvent> stalled = hung.Ending(
      kStart + absl::Seconds(61), bounds,
      WorkersAt({{"w1", At("FORWARD chunk=0 stage=1 mb=0", false)}}));
  ASSERT_TRUE(stalled);
  EXPECT_EQ(stalled->kind, JobEvent::Kind::kRunLost);
  ASSERT_EQ(stalled->left_out_workers.size(), 1u)
      << "the run's lost with w1 left out";
  EXPECT_EQ(stalled->left_out_workers[0].worker_id(), "w1");
}

}  // namespace
}  // namespace chimera::coordinator
