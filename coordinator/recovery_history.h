// A job's recent recoveries as its status keeps them (JobStatus.recoveries)
// for `chimera describe` and `chimera logs`: each run that was lost or
// ended to grow, filled in as the job goes on: the plan the next run starts
// with, the checkpoint it finds on disk, and its first step, which ends the
// time the job was not training.
//
//   RecoveryBegan("stalled", reason, now, &job);  // queued again, plan set
//   RecoveryStarted(&job);                        // the next run's plan set
//   RecoveryResumedAt(first_step, &job);          // its rank 0 found that
//   RecoveryTrained(later, &job);                 // its first step completed
#ifndef CHIMERA_COORDINATOR_RECOVERY_HISTORY_H_
#define CHIMERA_COORDINATOR_RECOVERY_HISTORY_H_

#include <string>

#include "absl/time/time.h"
#include "chimera/v1/service.pb.h"

namespace chimera::coordinator {

// The most recoveries a job's status keeps: the latest.
inline constexpr int kMaxRecoveriesKept = 20;

// "chimera W=1 D=4 on 4 workers" ("on 1 worker").
std::string PlanSummary(const chimera::v1::Plan& plan);

// `job`'s run (of its current plan and attempt) ended at wall time `now`
// for `cause` (RecoveryCauseName), `reason` saying why, and the job goes on
// from its latest complete checkpoint: a new entry, the oldest dropped past
// kMaxRecoveriesKept.
void RecoveryBegan(const std::string& cause, const std::string& reason,
                   absl::Time now, chimera::v1::Job* job);
// `job` started its next run with its plan.
void RecoveryStarted(chimera::v1::Job* job);
// The run resumed at `first_step`, the latest complete checkpoint on disk.
void RecoveryResumedAt(int first_step, chimera::v1::Job* job);
// The run completed a step at wall time `now`: its first ends the time the
// job was not training.
void RecoveryTrained(absl::Time now, chimera::v1::Job* job);

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_RECOVERY_HISTORY_H_
