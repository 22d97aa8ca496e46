// JobManager: the coordinator's job lifecycle. A job's states and the
// events that move it are job_state_machine.h's; the manager decides which
// event happened and applies what the state machine makes of it.
//
// A job whose run is lost in a way a retry may cure is restarted while
// status.restarts is below its spec.runPolicy.backoffLimit: a worker died,
// a task failed retryably (its process killed or crashed, a full disk, a
// lost peer or store: ReportTaskState's retryable), a rank stalled or rank
// 0 missed the rendezvous. Back to PENDING (it keeps its place in the queue,
// being older than what was submitted after it), then started on any idle
// workers with the next attempt number and planned again for them. Its rank
// 0 resumes from the latest complete checkpoint on disk and reports that
// step with READY; status.checkpoint_step, the latest every rank reported
// writing, only says where it will start at least. A rank failing with an
// error of its own (bad data, a non-finite loss) fails the job.
//
// An elastic job (spec.resources.minWorkers below workers) restarts on the
// idle workers left when fewer than it asks for, down to minWorkers,
// re-planned for them; with fewer registered it fails. Once idle workers
// would make it enough faster it grows back at its next checkpoint
// (job_manager_growth.cc), without spending a restart. A rank that hangs
// while its daemon lives (stalled in an op of its own, or its process
// stopped) or, with spec.runPolicy.replaceStragglers, straggles
// (straggler_watch.h) loses its run like a dead worker, and the job leaves
// its worker out (status.left_out_workers). Each queued-again run is a
// recovery, counted by cause and timed (recovery_stats.h) and kept in the
// job's status (recovery_history.h).
//
// Jobs start in submission order (FIFO; the head of the queue waits for
// enough idle workers, nothing overtakes it). A job whose spec fixes its
// parallelism runs that plan; otherwise the planner picks one for the
// workers it got. Starting a job sends rank 0 its task first: rank 0 hosts
// the rendezvous store and reports its address (ReportTaskState READY), then
// the other ranks get theirs. Every change is written to the JobStore
// before it is visible (job_table.h), so a restarted coordinator finds every
// job. Workers go on training while the coordinator is away and register
// again with the task they hold: a job found RUNNING goes on once each of
// its ranks is back (Adopt), and restarts or fails, naming the missing
// ranks, if one is not back within readopt_timeout.
//
//   JobManager manager(&store, &registry, options);
//   RETURN_IF_ERROR(manager.Recover());
//   ASSIGN_OR_RETURN(chimera::v1::Job job, manager.Submit(train_job));
//   // every heartbeat period: manager.Tick();
//
// Thread-safe.
#ifndef CHIMERA_COORDINATOR_JOB_MANAGER_H_
#define CHIMERA_COORDINATOR_JOB_MANAGER_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "chimera/v1/cluster.pb.h"
#include "chimera/v1/service.pb.h"
#include "common/clock.h"
#include "coordinator/background_planner.h"
#include "coordinator/job_growth.h"
#include "coordinator/job_launcher.h"
#include "coordinator/job_run.h"
#include "coordinator/job_state_machine.h"
#include "coordinator/job_store.h"
#include "coordinator/job_table.h"
#include "coordinator/recovery_stats.h"
#include "coordinator/step_aggregator.h"
#include "coordinator/straggler_watch.h"
#include "coordinator/trace_collector.h"
#include "coordinator/trace_waits.h"
#include "coordinator/worker_registry.h"

namespace chimera::coordinator {

struct JobManagerOptions {
  // Workers this coordinator can ever have; a job needing more is rejected
  // at submit. 0: no limit.
  int max_workers = 0;
  // How jobs are planned and what their workers are told.
  LaunchOptions launch;
  // Rank 0 must report its rendezvous store within this long.
  absl::Duration rendezvous_timeout = absl::Seconds(60);
  // After the rendezvous, a rank that reports no step for
  // max(progress_timeout, kStallFactor x the plan's predicted step time) has
  // stalled (a stopped process, a stuck collective or GPU): its job fails
  // naming it, long before a peer's receive would time out.
  absl::Duration progress_timeout = absl::Seconds(60);
  // The longest a queued job's plan is searched before the job fails,
  // saying so (chimera-coordinator --planning-timeout).
  absl::Duration planning_timeout = absl::Seconds(10);
  // How long each tick waits for a plan search before it moves on (the
  // search goes on in the background): most searches end within it, so a
  // job starts in the tick that queued it. Tests set it infinite.
  absl::Duration plan_wait = absl::Milliseconds(100);
  // After a coordinator restart, how long a job found RUNNING waits for its
  // workers to register again with its tasks: they notice the restart at
  // their next heartbeat.
  absl::Duration readopt_timeout = absl::Seconds(15);
};

// How long a submit may search whether a fixed plan fits the registered
// workers before it leaves that to the job's start.
inline constexpr absl::Duration kSubmitFitBudget = absl::Seconds(2);

// The pause between tries to start queued jobs while the store is full.
inline constexpr absl::Duration kMinStartBackoff = absl::Seconds(1);
inline constexpr absl::Duration kMaxStartBackoff = absl::Seconds(60);

class JobManager {
 public:
  // Times users see come from `clock`'s wall clock, every timeout from its
  // monotonic clock (tests pass a fake one).
  JobManager(JobStore* store, WorkerRegistry* workers, JobManagerOptions options,
             Clock clock = {});

  // Loads the live jobs from the store. Those a previous coordinator left
  // RUNNING wait readopt_timeout for their workers (Adopt); PENDING jobs
  // stay queued. Call it before anything else.
  absl::Status Recover();

  // A worker registered holding `task`. A job Recover() found RUNNING takes
  // it back as that rank, or records how it ended while the coordinator was
  // away; true when the worker is to go on running it, false when it must
  // stop it (a job not waiting for it, another attempt, a rank taken).
  bool Adopt(const std::string& worker_id, const chimera::v1::HeldTask& task);

  // Plans the job from `profile` where it is not empty (a measured profile
  // of its model, ValidateJobProfile), else from the analytic model. The
  // stored manifest has its model preset applied (jobspec/model_presets.h).
  // INVALID_ARGUMENT listing every problem of the spec or the profile;
  // FAILED_PRECONDITION for a job that can never run here (more workers than
  // max_workers), or one that fixes its parallelism none of whose variants fits
  // in the memory of the workers registered for it
  // (JobLauncher::CheckFitsRegistered).
  absl::StatusOr<chimera::v1::Job> Submit(
      const chimera::v1::TrainJob& submitted,
      const chimera::v1::ModelProfile& profile = {});
  absl::StatusOr<chimera::v1::Job> Get(const std::string& id);
  absl::StatusOr<std::vector<chimera::v1::Job>> List(chimera::v1::JobState state);
  // One page of List: the jobs in `state` submitted after `after_seq` (0:
  // from the first), oldest first, at most `max_jobs` of them and, past the
  // first, no more than `max_bytes` together; `next_after_seq` is where the
  // next page starts, 0 when this one holds the last job.
  using JobPage = JobStore::Page;
  absl::StatusOr<JobPage> ListPage(chimera::v1::JobState state,
                                   int64_t after_seq, int max_jobs,
                                   int64_t max_bytes);
  // The job's history after step `after` (steps count from 0).
  absl::StatusOr<std::vector<chimera::v1::StepSummary>> Steps(const std::string& id,
                                                              int after = -1);
  // PENDING or RUNNING -> STOPPED; FAILED_PRECONDITION once it has ended.
  absl::StatusOr<chimera::v1::Job> Stop(const std::string& id);
  // Ended jobs only; FAILED_PRECONDITION while PENDING or RUNNING.
  absl::Status Delete(const std::string& id);
  // Ranked plans for the spec on the registered workers (a dry run). Holds
  // no lock while it searches, so submits and workers' reports go on; ends
  // with CANCELLED once `cancelled` (asked between candidates) says so.
  absl::StatusOr<std::vector<chimera::v1::Plan>> Plans(
      const chimera::v1::TrainJob& submitted, int top_k,
      std::function<bool()> cancelled = {});

  // Liveness and scheduling: restarts or fails the jobs of dead workers,
  // fails runs whose held-back rank failure or rendezvous is overdue, and
  // starts queued jobs whose workers are free.
  void Tick();

  // The coordinator itself was stalled for `stall` (stopped, or starved of
  // CPU; its background loop measures it): the silence of workers and ranks
  // meanwhile is its own, so every liveness and progress timer, and the
  // rendezvous and held-failure timers, move `stall` later. The job's
  // activeDeadlineSeconds does not: it is wall time.
  void ExcuseStall(absl::Duration stall);

  // A worker went away with a task (missed heartbeats, or registered again
  // as a new incarnation): its job fails, naming it, or restarts.
  void OnWorkerLost(const std::string& worker_id, const TaskRef& task,
                    const std::string& reason);

  // A task's message beyond kMaxTaskMessageBytes is cut, at a character.
  absl::Status OnTaskState(const chimera::v1::ReportTaskStateRequest& report);
  // Records a rank's steps, in order; `response` (optional) says whether the
  // worker should send its timelines (someone traces the job).
  absl::Status OnMetrics(
      const chimera::v1::ReportMetricsRequest& report,
      chimera::v1::ReportMetricsResponse* response = nullptr);

  // TraceJob in three calls, so that the gRPC handler waits outside the
  // lock (with WaitForChange) and the ranks record timelines only while
  // someone waits:
  //
  //   ASSIGN_OR_RETURN(int from, manager.BeginTrace(id, step));
  //   ... TraceOf(id, from) until it holds a trace, then EndTrace(id, from)
  //
  // BeginTrace returns the first step that will do: `step`, or with none the
  // next step the job runs. NOT_FOUND for an unknown job,
  // FAILED_PRECONDITION for one that has ended, INVALID_ARGUMENT for a step
  // outside the job's steps or one that has already run and is not held.
  absl::StatusOr<int> BeginTrace(const std::string& id,
                                 std::optional<int> step);
  // The latest step >= `from_step` that every rank recorded, nullopt until
  // there is one; FAILED_PRECONDITION once the job has ended.
  absl::StatusOr<std::optional<chimera::v1::JobTrace>> TraceOf(
      const std::string& id, int from_step);
  // Ends one BeginTrace; once nobody waits, the ranks stop recording.
  void EndTrace(const std::string& id, int from_step);

  // The recoveries of this coordinator's jobs so far (recovery_stats.h).
  RecoveryCounts Recoveries() const;

  // A counter that moves whenever any job changes; WaitForChange blocks
  // until it differs from `seen` or `wait` passes, and returns it.
  uint64_t version() const;
  uint64_t WaitForChange(uint64_t seen, absl::Duration wait) const;
  // Moves the counter without a change, so that every WaitForChange returns
  // now (the coordinator is stopping and its waiters should see it).
  void WakeWaiters();

 private:
  // The parts of Tick, in order: a dead worker's job is failed or restarted
  // before its peers' held-back failures are judged; then every run that
  // must end (JobRun::Ending: its workers did not come back after a
  // restart, or it is overdue) is restarted or failed; all that frees
  // workers before queued jobs are started.
  void ReapDeadWorkersLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void EndOverdueRunsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Rank `rank` of `run` (on `worker_id`) ended, SUCCEEDED or not: frees its
  // worker; the last success ends the job SUCCEEDED, a failure is held back
  // one heartbeat timeout (JobRun::RankEnded).
  absl::Status RankEndedLocked(const std::string& job_id, JobRun* run, int rank,
                               const std::string& worker_id,
                               const RankEnd& end)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // One step of a rank's report (OnMetrics takes each in order).
  absl::Status OnStepLocked(const chimera::v1::ReportMetricsRequest& report,
                            const chimera::v1::WorkerStepMetrics& metrics,
                            chimera::v1::ReportMetricsResponse* response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Reports the ranks `found` straggling in `job`'s run; with
  // spec.runPolicy.replaceStragglers, ends the run without their workers
  // (like lost ones). Whether it ended.
  absl::StatusOr<bool> OnStragglersLocked(const chimera::v1::Job& job,
                                          const JobRun& run,
                                          const std::vector<Straggler>& found)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Rank 0 found the latest complete checkpoint at `first_step`: the job's
  // progress and checkpoint are that step's, whatever it saw before.
  absl::Status RecordFirstStepLocked(const std::string& job_id,
                                     int first_step)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Starts pending jobs in submission order while the head of the queue
  // finds enough idle workers; one that cannot start fails. Each job's plan
  // is searched by planner_, outside mutex_ and off the caller's thread (a
  // search can take seconds, and neither an RPC nor the liveness checks may
  // wait for it): a search that has not ended within options_.plan_wait
  // leaves the head waiting, "planning", until a later call finds it done.
  // The start is then checked again under mutex_.
  void StartQueuedJobs() ABSL_LOCKS_EXCLUDED(mutex_);
  // The head of the queue with the idle workers it would start on; none
  // when nothing is queued, or when the head must wait (saying why) or can
  // never go on (too few workers left for a job that may shrink: it fails).
  struct QueuedStart {
    chimera::v1::Job job;
    std::vector<std::string> workers;
  };
  std::optional<QueuedStart> NextStartLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Whether `start` still holds after its plan was searched unlocked: the
  // job still pending and the same workers still the ones it would take.
  bool StillStartableLocked(const QueuedStart& start) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Starts `start` with `launch`, or fails the job with why it cannot
  // start; false when the store is full (the job stays queued, and so do
  // those behind it).
  bool FinishStartLocked(QueuedStart start, absl::StatusOr<Launch> launch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // While no job is queued, searches (as StartQueuedJobs does) the plan of
  // a run on fewer workers than its job asks for with the idle workers
  // added, and records in the run whether that is worth growing to
  // (job_growth.h): it grows at its next checkpoint (GrowAtCheckpointLocked).
  void PlanGrowth() ABSL_LOCKS_EXCLUDED(mutex_);
  // A run whose growth is not yet judged for the idle workers there are
  // now, with its job and the workers it would grow to.
  struct GrowthSearch {
    std::string job_id;
    chimera::v1::TrainJob manifest;
    chimera::v1::ModelProfile profile;
    GrowthWorkers grow;
  };
  std::optional<GrowthSearch> NextGrowthLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The workers `run` of `job` would grow to now; none when it need not.
  std::optional<GrowthWorkers> GrowthWorkersLocked(const chimera::v1::Job& job,
                                                   const JobRun& run) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // `job`, whose run just recorded a new checkpoint, ends that run to start
  // again on more workers when its growth was judged worth it for the
  // workers idle now; whether it did.
  absl::StatusOr<bool> GrowAtCheckpointLocked(const chimera::v1::Job& job,
                                              const JobRun& run)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Records what a pending job waits for (`reason`), stored when that
  // changes.
  void SayPendingLocked(chimera::v1::Job job, absl::string_view reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  // Places `job`'s ranks of `launch` on `idle` (rank i on idle[i]), assigns
  // them their tasks, stores it RUNNING and then sends rank 0 its start;
  // the store's error (nothing sent) when it cannot record it.
  absl::Status StartLocked(chimera::v1::Job job, const std::vector<std::string>& idle,
                           Launch launch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The run of `job`'s next attempt on `workers`: every rank's task is
  // recorded with its worker, and every start held in the run (none sent).
  // All or nothing: a worker that cannot take its task frees the others.
  absl::StatusOr<JobRun> AssignTasksLocked(
      const chimera::v1::Job& job, Launch launch,
      const std::vector<std::string>& workers)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Moves job `id` on `event` (Succeeded, Failed, RunLost, StopRequested):
  // stops its run if it has one (its workers told to stop, and freed), then
  // records what the state machine makes of it: an outcome the store
  // refuses is kept by the table and written at every tick.
  absl::Status EndRunLocked(const std::string& id, const JobEvent& event)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Frees the workers of a run none of them heard of yet and forgets it.
  void WithdrawRunLocked(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Tells a running job's workers to stop and frees them; its state is the
  // caller's to set.
  void StopRunLocked(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  absl::Status SaveLocked(const chimera::v1::Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  void OnWorkerLostLocked(const std::string& worker_id, const TaskRef& task,
                          const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // OK when rank 0's READY report puts its rendezvous store on the host its
  // worker registered; otherwise the job fails and the report is
  // INVALID_ARGUMENT: the other ranks would connect wherever it says.
  absl::Status CheckStoreOnWorkerLocked(
      const chimera::v1::ReportTaskStateRequest& report)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The run a worker's report is about; NOT_FOUND when it is stale (another
  // attempt, or the rank is not that worker's). No `attempt`: any attempt.
  absl::StatusOr<JobRun*> RunForLocked(const std::string& job_id,
                                       std::optional<int> attempt, int rank,
                                       const std::string& worker_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  // Read directly only for pages of jobs and step histories, without
  // mutex_; every change goes through table_.
  JobStore* const store_;
  WorkerRegistry* const workers_;
  const JobManagerOptions options_;
  const Clock clock_;
  // Lock-free: the planner's thread uses it while mutex_ is free.
  const JobLauncher launcher_;
  mutable absl::Mutex mutex_;
  JobTable table_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, JobRun> runs_ ABSL_GUARDED_BY(mutex_);
  TraceWaits trace_waits_ ABSL_GUARDED_BY(mutex_);
  uint64_t version_ ABSL_GUARDED_BY(mutex_) = 0;
  RecoveryStats recoveries_ ABSL_GUARDED_BY(mutex_);
  // While the store is full, starts are tried again after a pause that
  // doubles each time (kMinStartBackoff to kMaxStartBackoff).
  absl::Duration start_backoff_ ABSL_GUARDED_BY(mutex_);
  absl::Time next_start_try_ ABSL_GUARDED_BY(mutex_) = absl::InfinitePast();
  // Until then (readopt_timeout and a heartbeat timeout after this
  // coordinator's start) workers may still be registering again: too few
  // registered does not yet fail a job.
  const absl::Time workers_back_by_;
  // Last: its thread calls the launcher, so it stops before the rest goes.
  BackgroundPlanner planner_{options_.planning_timeout};
};

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_JOB_MANAGER_H_
