// When a task's finished steps go to the coordinator. A step goes at once
// unless the last report went less than an interval ago; then it waits,
// with the steps that follow it, until the interval has passed. A job whose
// steps take milliseconds (the quick start's take 30 ms) then costs the
// coordinator and its own host one ReportMetrics call per interval instead of
// one per step and rank; slower steps are reported as they end. A step that
// reports a newer durable checkpoint goes at once, and so does a step after
// which a checkpoint is taken: a restart resumes from the latest checkpoint
// complete on disk, so every step before it must have reached the
// coordinator, or its record (its loss) would be lost with a killed daemon.
// The daemon sends what is held before it reports the task's end (and each
// step at once while the job is traced: a traced step carries its
// timeline).
//
//   StepReports reports(kStepReportInterval, kMaxStepsPerReport,
//                       training.checkpoint_every());
//   reports.Add(metrics);  // as each step ends
//   if (reports.Due(absl::Now())) Send(reports.Take(absl::Now()));
//   ... wait for the next step at most reports.TimeUntilDue(absl::Now()) ...
#ifndef CHIMERA_WORKER_DAEMON_STEP_REPORTS_H_
#define CHIMERA_WORKER_DAEMON_STEP_REPORTS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "chimera/v1/service.pb.h"

namespace chimera::worker {

// At most five reports a second per task; the coordinator's hang and
// straggler watches count in seconds.
inline constexpr absl::Duration kStepReportInterval = absl::Milliseconds(200);
// Keeps a report far below the coordinator's request size limit even with
// every step's timeline.
inline constexpr size_t kMaxStepsPerReport = 64;

class StepReports {
 public:
  // `checkpoint_every`: the job's steps between checkpoints (0: none).
  StepReports(absl::Duration interval, size_t max_held,
              int64_t checkpoint_every = 0);

  // Holds a step that has just ended.
  void Add(chimera::v1::WorkerStepMetrics metrics);
  // Whether the held steps should be sent at `now`.
  bool Due(absl::Time now) const;
  // How long after `now` the held steps become due: zero when they are,
  // infinite when none are held.
  absl::Duration TimeUntilDue(absl::Time now) const;
  // The held steps, oldest first, as a report sent at `now` (none held:
  // nothing is sent, and nothing changes).
  std::vector<chimera::v1::WorkerStepMetrics> Take(absl::Time now);

 private:
  bool TakesACheckpointAfter(
      const chimera::v1::WorkerStepMetrics& metrics) const;

  const absl::Duration interval_;
  const size_t max_held_;
  const int64_t checkpoint_every_;
  std::vector<chimera::v1::WorkerStepMetrics> held_;
  absl::Time last_sent_ = absl::InfinitePast();
  // The newest durable checkpoint a sent report named.
  int32_t sent_checkpoint_ = 0;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_DAEMON_STEP_REPORTS_H_
