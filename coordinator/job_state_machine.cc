#include "coordinator/job_state_machine.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/job_states.h"
#include "coordinator/recovery_history.h"

namespace chimera::coordinator {
namespace {

using chimera::v1::Job;
using chimera::v1::JobState;

double UnixSeconds(absl::Time time) {
  return absl::ToDoubleSeconds(time - absl::UnixEpoch());
}

absl::Status NoSuchArrow(JobState state, JobEvent::Kind kind) {
  return absl::FailedPreconditionError(absl::StrCat(
      "a ", JobStateName(state), " job cannot take the event ", KindName(kind)));
}

Job Ended(Job job, JobState state, std::string message, absl::Time now) {
  chimera::v1::JobStatus& status = *job.mutable_status();
  status.set_state(state);
  status.set_message(std::move(message));
  status.set_end_time(UnixSeconds(now));
  status.clear_waiting_for();
  return job;
}

// Back to the queue for its next attempt, from its latest checkpoint, after
// `event` ended its run; a restart counts against the job's backoffLimit.
Job Requeued(Job job, const JobEvent& event, absl::Time now, bool restart) {
  RecoveryBegan(RecoveryCauseName(event.cause), event.reason, now, &job);
  chimera::v1::JobStatus& status = *job.mutable_status();
  if (restart) status.set_restarts(status.restarts() + 1);
  status.set_state(chimera::v1::JOB_STATE_PENDING);
  // Steps after the checkpoint are lost and will run again.
  status.set_completed_steps(status.checkpoint_step());
  status.set_restart_cause(event.reason);
  status.clear_waiting_for();
  // Planned again for the workers it gets next (its checkpoint loads under
  // any partition).
  job.clear_plan();
  status.set_message(PendingMessage(job));
  return job;
}

// `workers` (that hung or straggled) join those the job starts on no more;
// a worker listed already is listed with its latest incarnation.
void LeaveOut(const std::vector<chimera::v1::WorkerIncarnation>& workers,
              chimera::v1::JobStatus* status) {
  for (const chimera::v1::WorkerIncarnation& worker : workers) {
    auto* listed = status->mutable_left_out_workers();
    auto same = std::find_if(listed->begin(), listed->end(),
                             [&worker](const auto& other) {
                               return other.worker_id() == worker.worker_id();
                             });
    *(same != listed->end() ? &*same : status->add_left_out_workers()) = worker;
  }
}

absl::StatusOr<Job> FromPending(Job job, const JobEvent& event,
                                absl::Time now) {
  chimera::v1::JobStatus& status = *job.mutable_status();
  switch (event.kind) {
    case JobEvent::Kind::kWaiting:
      status.set_waiting_for(event.reason);
      status.set_message(PendingMessage(job));
      return job;
    case JobEvent::Kind::kStarted:
      status.set_attempt(AttemptOf(job) + 1);
      status.set_state(chimera::v1::JOB_STATE_RUNNING);
      status.clear_waiting_for();
      status.clear_message();
      // A restart keeps the first start: the deadline counts from it.
      if (status.start_time() == 0) status.set_start_time(UnixSeconds(now));
      RecoveryStarted(&job);
      // The new run's ranks are judged afresh.
      status.clear_stragglers();
      return job;
    case JobEvent::Kind::kFailed:
      return Ended(std::move(job), chimera::v1::JOB_STATE_FAILED, event.reason,
                   now);
    case JobEvent::Kind::kStopRequested:
      return Ended(std::move(job), chimera::v1::JOB_STATE_STOPPED,
                   "stopped on request before it started", now);
    default:
      return NoSuchArrow(status.state(), event.kind);
  }
}

absl::StatusOr<Job> FromRunning(Job job, const JobEvent& event,
                                absl::Time now) {
  switch (event.kind) {
    case JobEvent::Kind::kSucceeded: {
      // Its ranks ran every step, also those whose reports were lost while
      // a coordinator restarted.
      const int steps = job.manifest().spec().training().max_steps();
      job.mutable_status()->set_completed_steps(steps);
      return Ended(std::move(job), chimera::v1::JOB_STATE_SUCCEEDED, "", now);
    }
    case JobEvent::Kind::kFailed:
      return Ended(std::move(job), chimera::v1::JOB_STATE_FAILED, event.reason,
                   now);
    case JobEvent::Kind::kRunLost:
      LeaveOut(event.left_out_workers, job.mutable_status());
      if (job.status().restarts() <
          job.manifest().spec().run_policy().backoff_limit()) {
        return Requeued(std::move(job), event, now, /*restart=*/true);
      }
      return Ended(std::move(job), chimera::v1::JOB_STATE_FAILED, event.reason,
                   now);
    case JobEvent::Kind::kStopRequested:
      return Ended(std::move(job), chimera::v1::JOB_STATE_STOPPED,
                   "stopped on request", now);
    case JobEvent::Kind::kGrowing:
      return Requeued(std::move(job), event, now, /*restart=*/false);
    default:
      return NoSuchArrow(job.status().state(), event.kind);
  }
}

}  // namespace

int AttemptOf(const Job& job) {
  // A job stored before attempts were counted: restarts + 1 while running.
  const chimera::v1::JobStatus& status = job.status();
  const bool running = status.state() == chimera::v1::JOB_STATE_RUNNING;
  return std::max(status.attempt(), status.restarts() + (running ? 1 : 0));
}

std::string RecoveryCauseName(RecoveryCause cause) {
  switch (cause) {
    case RecoveryCause::kWorkerLost:
      return "worker_lost";
    case RecoveryCause::kTaskFailed:
      return "task_failed";
    case RecoveryCause::kStalled:
      return "stalled";
    case RecoveryCause::kRendezvous:
      return "rendezvous";
    case RecoveryCause::kCoordinatorRestart:
      return "coordinator_restart";
    case RecoveryCause::kGrow:
      return "grow";
    case RecoveryCause::kStraggler:
      return "straggler";
  }
  return "unknown";
}

std::string KindName(JobEvent::Kind kind) {
  switch (kind) {
    case JobEvent::Kind::kSubmitted:
      return "Submitted";
    case JobEvent::Kind::kWaiting:
      return "Waiting";
    case JobEvent::Kind::kStarted:
      return "Started";
    case JobEvent::Kind::kSucceeded:
      return "Succeeded";
    case JobEvent::Kind::kFailed:
      return "Failed";
    case JobEvent::Kind::kRunLost:
      return "RunLost";
    case JobEvent::Kind::kStopRequested:
      return "StopRequested";
    case JobEvent::Kind::kGrowing:
      return "Growing";
  }
  return "unknown";
}

absl::StatusOr<Job> Transition(Job job, const JobEvent& event, absl::Time now) {
  switch (job.status().state()) {
    case chimera::v1::JOB_STATE_UNSPECIFIED:
      if (event.kind != JobEvent::Kind::kSubmitted) {
        return NoSuchArrow(job.status().state(), event.kind);
      }
      job.mutable_status()->set_state(chimera::v1::JOB_STATE_PENDING);
      job.mutable_status()->set_submit_time(UnixSeconds(now));
      return job;
    case chimera::v1::JOB_STATE_PENDING:
      return FromPending(std::move(job), event, now);
    case chimera::v1::JOB_STATE_RUNNING:
      return FromRunning(std::move(job), event, now);
    default:
      // SUCCEEDED, FAILED, STOPPED: ended for good.
      return NoSuchArrow(job.status().state(), event.kind);
  }
}

std::string PendingMessage(const Job& job) {
  const chimera::v1::JobStatus& status = job.status();
  std::vector<std::string> parts;
  if (!status.restart_cause().empty()) {
    const bool checkpoints =
        job.manifest().spec().training().checkpoint_every() > 0;
    parts.push_back(absl::StrCat(
        status.restart_cause(), "; restarting from ",
        checkpoints
            ? absl::StrCat("its latest complete checkpoint (step ",
                           status.checkpoint_step(), " or later)")
            : "step 0 (it takes no checkpoints)",
        " (restart ", status.restarts(), " of ",
        job.manifest().spec().run_policy().backoff_limit(), ")"));
  }
  if (!status.waiting_for().empty()) {
    parts.push_back(absl::StrCat("waiting: ", status.waiting_for()));
  }
  return absl::StrJoin(parts, "; ");
}

}  // namespace chimera::coordinator
