// How often the coordinator's jobs recovered (a lost run queued again, or a
// shrunk one ended to grow), by cause, and how long each recovery kept its
// job from training: from the run's end to the first step of the next one.
// Kept since this coordinator started, for chimera_job_recoveries_total and
// chimera_job_recovery_duration_seconds.
//
//   stats.Began(id, RecoveryCause::kWorkerLost, now);  // run lost, requeued
//   stats.Trained(id, later);  // a step of its next run: one observation
//
// Not thread-safe: the JobManager's lock guards it.
#ifndef CHIMERA_COORDINATOR_RECOVERY_STATS_H_
#define CHIMERA_COORDINATOR_RECOVERY_STATS_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include "absl/time/time.h"
#include "coordinator/job_state_machine.h"

namespace chimera::coordinator {

// Upper bounds, in seconds, of the recovery durations' histogram buckets
// (and +Inf): a tiny job on loopback recovers in seconds, a large one loads
// its checkpoint for minutes.
inline constexpr std::array<double, 10> kRecoveryBuckets = {
    1, 2, 5, 10, 20, 30, 60, 120, 300, 600};

struct RecoveryCounts {
  // Every cause, counted from 0.
  std::map<RecoveryCause, int64_t> by_cause;
  // Observations at most kRecoveryBuckets[i] seconds (cumulative), then
  // all of them.
  std::array<int64_t, kRecoveryBuckets.size()> at_most{};
  int64_t observed = 0;
  double seconds = 0;
};

class RecoveryStats {
 public:
  RecoveryStats();

  // Job `id`'s run ended at `now` (monotonic) for `cause` and the job is
  // queued again: one recovery, timed until its next step.
  void Began(const std::string& id, RecoveryCause cause, absl::Time now);
  // Job `id` completed a step at `now`: the end of its recovery, if one
  // was under way.
  void Trained(const std::string& id, absl::Time now);
  // Job `id` ended: a recovery under way is not timed.
  void Forget(const std::string& id);

  const RecoveryCounts& counts() const { return counts_; }

 private:
  RecoveryCounts counts_;
  std::map<std::string, absl::Time> since_;
};

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_RECOVERY_STATS_H_
