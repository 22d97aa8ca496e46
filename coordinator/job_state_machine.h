// The job lifecycle of job_manager.h's diagram, as one pure function: what a
// job becomes on an event, or why the event cannot happen to it now.
//
//   Submitted ──► PENDING ──Started──► RUNNING ──Succeeded──► SUCCEEDED
//                  │  ▲ Waiting          │  │
//                  │  └─RunLost/Growing──┘  ├──Failed, or RunLost with no
//                  │     (restarts left)    │  restart left──► FAILED
//                  ├──Failed (it cannot start)───────────────► FAILED
//                  └──StopRequested──► STOPPED ◄──StopRequested┘
//
// The manager applies what Transition returns; nothing else sets a job's
// state, restarts, waiting_for, restart_cause, left_out_workers or message. A
// pending job's message is written from its structured fields (PendingMessage),
// never read back.
//
//   ASSIGN_OR_RETURN(Job running, Transition(job, JobEvent::Started(), now));
#ifndef CHIMERA_COORDINATOR_JOB_STATE_MACHINE_H_
#define CHIMERA_COORDINATOR_JOB_STATE_MACHINE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chimera/v1/service.pb.h"

namespace chimera::coordinator {

// Why a run was lost, or ended to grow: the cause label of
// chimera_job_recoveries_total.
enum class RecoveryCause {
  kWorkerLost,          // its heartbeats stopped, or it registered anew
  kTaskFailed,          // a task failed in a way a retry may cure
  kStalled,             // a rank reported no step for too long
  kRendezvous,          // rank 0 did not report its store in time
  kCoordinatorRestart,  // its workers did not come back to a new coordinator
  kGrow,                // it moved to more workers
  kStraggler,           // a rank straggled (spec.runPolicy.replaceStragglers)
};
inline constexpr RecoveryCause kAllRecoveryCauses[] = {
    RecoveryCause::kWorkerLost,
    RecoveryCause::kTaskFailed,
    RecoveryCause::kStalled,
    RecoveryCause::kRendezvous,
    RecoveryCause::kCoordinatorRestart,
    RecoveryCause::kGrow,
    RecoveryCause::kStraggler};
// "worker_lost", "task_failed", ...
std::string RecoveryCauseName(RecoveryCause cause);

struct JobEvent {
  enum class Kind {
    // Accepted into the queue.
    kSubmitted,
    // Still queued, for `reason` ("needs 4 idle cpu workers (…)").
    kWaiting,
    // Its gang started on its workers.
    kStarted,
    // Every rank ran every step.
    kSucceeded,
    // It cannot go on: `reason` says why.
    kFailed,
    // Its run was lost in a way a retry may cure (`reason`: a worker died,
    // a task was killed): queued again while restarts are left, else failed.
    kRunLost,
    // Its user asked it to stop.
    kStopRequested,
    // A run on fewer workers than the job asks for ends at a checkpoint to
    // start again on more (`reason`: how many, and how much faster): queued
    // again, with no restart counted.
    kGrowing,
  };
  static constexpr Kind kAllKinds[] = {
      Kind::kSubmitted, Kind::kWaiting, Kind::kStarted,       Kind::kSucceeded,
      Kind::kFailed,    Kind::kRunLost, Kind::kStopRequested, Kind::kGrowing};

  static JobEvent Submitted() { return Of(Kind::kSubmitted); }
  static JobEvent Waiting(std::string reason) {
    return Of(Kind::kWaiting, std::move(reason));
  }
  static JobEvent Started() { return Of(Kind::kStarted); }
  static JobEvent Succeeded() { return Of(Kind::kSucceeded); }
  static JobEvent Failed(std::string reason) {
    return Of(Kind::kFailed, std::move(reason));
  }
  static JobEvent RunLost(
      std::string reason, RecoveryCause cause,
      std::vector<chimera::v1::WorkerIncarnation> left_out_workers = {}) {
    JobEvent event = Of(Kind::kRunLost, std::move(reason), cause);
    event.left_out_workers = std::move(left_out_workers);
    return event;
  }
  static JobEvent StopRequested() { return Of(Kind::kStopRequested); }
  static JobEvent Growing(std::string reason) {
    return Of(Kind::kGrowing, std::move(reason), RecoveryCause::kGrow);
  }

  Kind kind = Kind::kSubmitted;
  std::string reason;
  // kRunLost and kGrowing: what ended the run.
  RecoveryCause cause = RecoveryCause::kWorkerLost;
  // kRunLost: workers whose task hung (and held the others up) or
  // straggled; the job leaves them out from now on
  // (JobStatus.left_out_workers).
  std::vector<chimera::v1::WorkerIncarnation> left_out_workers;

 private:
  static JobEvent Of(Kind kind, std::string reason = "",
                     RecoveryCause cause = RecoveryCause::kWorkerLost) {
    JobEvent event;
    event.kind = kind;
    event.reason = std::move(reason);
    event.cause = cause;
    return event;
  }
};

// "RunLost", for errors and logs.
std::string KindName(JobEvent::Kind kind);

// `job` after `event` at wall time `now`; FAILED_PRECONDITION naming the
// state and the event where the diagram has no such arrow (an ended job
// never moves again). A job that goes back to the queue loses its plan (it
// is planned again for the workers it gets next) and the steps after its
// latest checkpoint; one that ends gets its end time.
absl::StatusOr<chimera::v1::Job> Transition(chimera::v1::Job job,
                                            const JobEvent& event,
                                            absl::Time now);

// The attempt of `job`'s run while it runs, or of its last run (0: none
// yet): JobStatus.attempt, which each start counts up.
int AttemptOf(const chimera::v1::Job& job);

// A pending job's message: why it restarted (with where it resumes and
// which restart this is), then what it waits for.
std::string PendingMessage(const chimera::v1::Job& job);

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_JOB_STATE_MACHINE_H_
