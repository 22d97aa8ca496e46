// A running job's steps as its ranks report them: each rank reports every
// step it finishes; a step is complete once every rank has, and is then
// folded into what users follow (the job's latest step, its workers' view,
// its latest complete checkpoint). Steps before a complete one are dropped:
// a report of them can no longer complete anything.
//
//   StepAggregator steps(/*ranks=*/4);
//   if (std::optional<CompletedStep> done = steps.Add(rank, metrics)) {
//     RecordStep(*done, manifest, worker_of_rank, now, &job);
//   }
#ifndef CHIMERA_COORDINATOR_STEP_AGGREGATOR_H_
#define CHIMERA_COORDINATOR_STEP_AGGREGATOR_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chimera/v1/service.pb.h"

namespace chimera::coordinator {

struct CompletedStep {
  int step = 0;
  // Every rank's report, by rank.
  std::map<int, chimera::v1::WorkerStepMetrics> ranks;
};

class StepAggregator {
 public:
  explicit StepAggregator(int ranks) : ranks_(ranks) {}

  // Records rank `rank`'s report of its step; the step once `rank` was the
  // last to report it. A rank reporting a step again replaces its report.
  std::optional<CompletedStep> Add(int rank,
                                   const chimera::v1::WorkerStepMetrics& metrics);

 private:
  int ranks_;
  // Per step not yet complete, each rank's report.
  std::map<int, std::map<int, chimera::v1::WorkerStepMetrics>> pending_;
};

// One step's reports folded into what users follow: the loss (the last
// stages' shares summed), the slowest rank's step time, the mean bubble,
// the largest peak, and samples and tokens per second of the job's batch.
chimera::v1::StepSummary Summarize(const CompletedStep& step,
                                   const chimera::v1::TrainJob& manifest);

// Records `step`, completed at `now`, in `job`: its summary as the latest
// step, the steps done, the workers' view (rank r on worker_of_rank[r]) and
// the latest complete checkpoint: the least of the checkpoints the ranks
// report having written their shares of, when it is later than the one
// recorded; and, for the first step after a recovery, the time the job was
// not training.
void RecordStep(const CompletedStep& step,
                const std::vector<std::string>& worker_of_rank, absl::Time now,
                chimera::v1::Job* job);

// Rank 0 found the job's latest complete checkpoint on disk at
// `first_step`, where every rank starts: recorded in `job` as the steps done
// and the checkpoint (the disk decides, whatever the coordinator saw), also
// as the one a recovery resumed from.
// Whether that changed `job`; INVALID_ARGUMENT when `first_step` is not in
// [0, maxSteps].
absl::StatusOr<bool> RecordFirstStep(int first_step, chimera::v1::Job* job);

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_STEP_AGGREGATOR_H_
