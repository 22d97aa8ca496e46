// The live part of a RUNNING job (its workers, held starts, timers, step
// reports, held failure and traces) and the decisions about it that need
// nobody else: whether it is overdue, whether its ranks came back after a
// coordinator restart, what a rank's report means. The run changes only
// itself; what it returns (starts to send, a run that succeeded, a verdict)
// the JobManager acts on under its lock.
//
//   if (std::optional<RunVerdict> verdict = run.Overdue(now, bounds)) {
//     end the run: verdict->retryable ? restart (RunLost) : fail
//   }
//   for (auto& [worker, start] : run.ReleaseStarts(store, now)) send it;
#ifndef CHIMERA_COORDINATOR_JOB_RUN_H_
#define CHIMERA_COORDINATOR_JOB_RUN_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "chimera/v1/service.pb.h"
#include "coordinator/job_growth.h"
#include "coordinator/job_state_machine.h"
#include "coordinator/step_aggregator.h"
#include "coordinator/straggler_watch.h"
#include "coordinator/trace_collector.h"

namespace chimera::coordinator {

// How many predicted step times a rank may go without reporting a step.
inline constexpr double kStallFactor = 10;

// How long a run may take to reach its rendezvous, how long a rank may go
// without a step (at least; kStallFactor predicted steps when longer), and
// how long a restarted coordinator waits for a run's workers to come back.
struct RunBounds {
  absl::Duration rendezvous_timeout;
  absl::Duration progress_timeout;
  absl::Duration readopt_timeout = absl::ZeroDuration();
};

// How a rank's task ended, as its worker reported it.
struct RankEnd {
  chimera::v1::TaskState state;  // SUCCEEDED, FAILED or STOPPED
  std::string message;
  // A FAILED task that may pass when run again.
  bool retryable = false;
};

// The most of a task's own message (why it failed) a job's status keeps: a
// task's error is a line or a few, and a status that every `chimera status`
// reads and the store keeps must not grow with what a worker sends.
inline constexpr size_t kMaxTaskMessageBytes = 4096;

// Why an overdue run ends, and whether a retry may cure it (the job then
// restarts while its backoffLimit allows).
struct RunVerdict {
  std::string reason;
  bool retryable = false;
  RecoveryCause cause = RecoveryCause::kTaskFailed;
  // A stall: the workers whose rank hung and held the others up.
  std::vector<chimera::v1::WorkerIncarnation> left_out_workers;
};

// The registry's view of a worker: its incarnation, and where its task is
// (WorkerInfo.task_position); none for a worker it no longer knows.
using WorkerLookup = std::function<std::optional<chimera::v1::WorkerInfo>(
    const std::string& worker_id)>;

struct JobRun {
  int attempt = 0;
  std::vector<std::string> worker_of_rank;
  // Every rank's start task, by rank: rank 0's goes out once the run is
  // recorded, the others' once rank 0 reports its store.
  std::vector<chimera::v1::Assignment> held_starts;
  absl::Time started;
  // spec.runPolicy.activeDeadlineSeconds (0: none) after the job's first
  // start.
  int64_t deadline_seconds = 0;
  absl::Time deadline = absl::InfiniteFuture();
  bool rendezvous_done = false;
  std::vector<bool> rank_done;
  // Per rank, when it last showed progress: the rendezvous, then each
  // step it reported; and whether it reported one in this run.
  std::vector<absl::Time> last_progress;
  std::vector<bool> stepped;
  // The plan's predicted step time, and the job's steps.
  absl::Duration predicted_step;
  int64_t max_steps = 0;
  // The ranks' reports of the steps not yet complete.
  StepAggregator steps{0};
  // Found RUNNING by Recover(): the time by which every rank's worker must
  // be back (worker_of_rank is "" for those that are not yet).
  absl::Time readopt_by = absl::InfiniteFuture();
  // The first rank failure, held back for one heartbeat timeout: when a
  // worker dies, its peers fail on the broken connection before its
  // heartbeats are missed, and the job should name the dead worker. A
  // failure that would recur replaces one that might not: a rank's own
  // error is the cause of its peers' lost connections.
  std::optional<std::string> failure;
  // Every failure held so far may pass on a retry: the job restarts
  // rather than fails while spec.runPolicy.backoffLimit allows.
  bool failure_retryable = true;
  absl::Time fail_by;
  // Timelines the ranks send while someone traces the job.
  TraceCollector traces{0};
  // On fewer workers than its job asks for: whether the idle ones would
  // make it enough faster, as the last search found (job_growth.h).
  std::optional<Growth> growth;
  // Which ranks compute consistently slower than their peers.
  StragglerWatch stragglers;

  // A run of `plan` for `job`'s current attempt on `ranks` workers, none
  // placed yet, started at `now` (monotonic) with its deadline counted from
  // the job's first start (`wall_now` converts it).
  static JobRun For(const chimera::v1::Job& job, const chimera::v1::Plan& plan,
                    int ranks, absl::Time now, absl::Time wall_now);
  // The run a restarted coordinator finds RUNNING in the store: past its
  // rendezvous, no rank's worker back yet, waiting for them until
  // now + readopt_timeout.
  static JobRun Recovered(const chimera::v1::Job& job, int ranks,
                          absl::Time now, absl::Time wall_now,
                          absl::Duration readopt_timeout);

  // Whether `worker` runs rank `rank` of this run, in `attempt` when one is
  // named: who may report on the rank.
  bool Runs(std::optional<int> attempt, int rank,
            const std::string& worker) const;
  // INVALID_ARGUMENT, naming the field, unless `step` is one of the job's.
  absl::Status CheckStep(int step) const;
  // Rank `rank` reported a step at `now`.
  void Stepped(int rank, absl::Time now);

  // Whether a worker that registered holding rank `rank` of `attempt` may
  // take that rank back: the run waits for it and no worker has it yet.
  bool MayAdopt(int attempt, int rank) const;
  // `worker` holds rank `rank` again; true once every rank is back (the run
  // no longer waits for its workers).
  bool Adopt(int rank, const std::string& worker);

  // Rank 0 reported its rendezvous store at `store_address` at `now`: the
  // other ranks' starts, each with that address, for their workers (rank
  // 0's went out when the run began); every rank's progress is timed from
  // now.
  std::vector<std::pair<std::string, chimera::v1::Assignment>> ReleaseStarts(
      const std::string& store_address, absl::Time now);

  // Rank `rank` (on `worker`) ended as `end` says at `now`; true when that
  // makes every rank succeeded. A failure is held until `now + hold` (see
  // `failure`): the first, or a later one that would recur where those held
  // might not.
  bool RankEnded(int rank, const std::string& worker, const RankEnd& end,
                 absl::Time now, absl::Duration hold);

  // The workers that hold a rank of the run (after a coordinator restart,
  // those back so far).
  std::vector<std::string> PlacedWorkers() const;
  // What ends the run on its workers: a stop of job `id` for each placed
  // rank still running.
  std::vector<std::pair<std::string, chimera::v1::Assignment>> StopOrders(
      const std::string& id) const;

  // The latest step of the run that every rank recorded, as TraceJob
  // returns it for job `id` running `plan`; none when there is none.
  std::optional<chimera::v1::JobTrace> CompleteTrace(
      const std::string& id, const chimera::v1::Plan& plan) const;

  // The event that ends the run at `now`, if one must: RunLost when its
  // workers did not come back after a coordinator restart (Unadopted) or
  // when an Overdue verdict is retryable, Failed when it is not.
  std::optional<JobEvent> Ending(absl::Time now, const RunBounds& bounds,
                                 const WorkerLookup& workers) const;

  // Why the run must end at `now`, if it must: a failure held back until
  // fail_by, rank 0 late for the rendezvous, the job's deadline passed, or
  // a rank that stalled (Stalled, which asks `workers` where their tasks
  // are). None while ranks are still missing after a coordinator restart:
  // their peers' failures would blame the wrong ranks.
  std::optional<RunVerdict> Overdue(absl::Time now, const RunBounds& bounds,
                                    const WorkerLookup& workers) const;
  // After a coordinator restart, why the run is given up at `now` once
  // readopt_by has passed: the ranks whose workers did not come back.
  std::optional<std::string> Unadopted(absl::Time now,
                                       absl::Duration readopt_timeout) const;
  // The coordinator itself was silent for `stall`: every timer moves on by
  // it, so that the silence counts against no rank.
  void Excuse(absl::Duration stall);

 private:
  // Its ranks that showed no progress for `bound` (`first_bound` before
  // their first step of the run), named with their workers and the op each
  // is in (as `workers` says), and with them any rank whose process is
  // stopped; none while every rank progresses. Those whose op waits for no
  // peer, or whose process is stopped, hold the others up: the verdict's
  // hung workers. Where every stalled rank waits for a peer (a lost message,
  // a broken network), it blames none.
  std::optional<RunVerdict> Stalled(absl::Time now, absl::Duration bound,
                                    absl::Duration first_bound,
                                    const WorkerLookup& workers) const;
};

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_JOB_RUN_H_
