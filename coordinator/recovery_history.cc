#include "coordinator/recovery_history.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "coordinator/job_state_machine.h"

namespace chimera::coordinator {
namespace {

double UnixSeconds(absl::Time time) {
  return absl::ToDoubleSeconds(time - absl::UnixEpoch());
}

// The entry of the run `job` runs now (its attempt); null when none is, or
// the job never recovered.
chimera::v1::JobRecovery* OfCurrentRun(chimera::v1::Job* job) {
  chimera::v1::JobStatus& status = *job->mutable_status();
  if (status.recoveries_size() == 0) return nullptr;
  chimera::v1::JobRecovery* last =
      status.mutable_recoveries(status.recoveries_size() - 1);
  return last->attempt() == AttemptOf(*job) ? last : nullptr;
}

}  // namespace

std::string PlanSummary(const chimera::v1::Plan& plan) {
  const int workers = plan.placement_size();
  return absl::StrCat(plan.scheme(), " W=", plan.width(), " D=", plan.depth(),
                      " on ", workers, workers == 1 ? " worker" : " workers");
}

void RecoveryBegan(const std::string& cause, const std::string& reason,
                   absl::Time now, chimera::v1::Job* job) {
  chimera::v1::JobStatus& status = *job->mutable_status();
  chimera::v1::JobRecovery recovery;
  recovery.set_cause(cause);
  recovery.set_reason(reason);
  recovery.set_time(UnixSeconds(now));
  if (job->has_plan()) recovery.set_from_plan(PlanSummary(job->plan()));
  recovery.set_attempt(AttemptOf(*job) + 1);
  recovery.set_checkpoint_step(status.checkpoint_step());
  auto& kept = *status.mutable_recoveries();
  if (kept.size() >= kMaxRecoveriesKept) {
    kept.DeleteSubrange(0, kept.size() - kMaxRecoveriesKept + 1);
  }
  *kept.Add() = std::move(recovery);
}

void RecoveryStarted(chimera::v1::Job* job) {
  if (chimera::v1::JobRecovery* recovery = OfCurrentRun(job)) {
    recovery->set_to_plan(PlanSummary(job->plan()));
  }
}

void RecoveryResumedAt(int first_step, chimera::v1::Job* job) {
  if (chimera::v1::JobRecovery* recovery = OfCurrentRun(job)) {
    recovery->set_checkpoint_step(first_step);
  }
}

void RecoveryTrained(absl::Time now, chimera::v1::Job* job) {
  chimera::v1::JobRecovery* recovery = OfCurrentRun(job);
  if (recovery == nullptr || recovery->seconds_not_training() > 0) return;
  recovery->set_seconds_not_training(
      std::max(UnixSeconds(now) - recovery->time(), 1e-6));
}

}  // namespace chimera::coordinator
