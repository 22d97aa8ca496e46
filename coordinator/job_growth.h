// Growing a shrunk job back: a job that went on with fewer workers than it
// asks for (spec.resources.minWorkers) moves to more at a checkpoint when
// idle workers make its plan predicted faster by its
// spec.runPolicy.growThreshold. These are the decisions; the JobManager
// searches the bigger plan and ends the run at the checkpoint.
//
//   if (std::optional<GrowthWorkers> grow = GrowthWorkersFor(job, placed,
//   idle))
//     search the plan for grow->workers, then
//   run.growth = Growth{grow->key, WorthGrowing(job, job.plan(), bigger)};
#ifndef CHIMERA_COORDINATOR_JOB_GROWTH_H_
#define CHIMERA_COORDINATOR_JOB_GROWTH_H_

#include <optional>
#include <string>
#include <vector>

#include "chimera/v1/plan.pb.h"
#include "chimera/v1/service.pb.h"

namespace chimera::coordinator {

// spec.runPolicy.growThreshold's default: 10 % faster.
inline constexpr double kDefaultGrowThreshold = 0.1;

// The workers a shrunk job would run on: those it holds, then idle ones
// until it has as many as it asks for, and the search's key for them.
struct GrowthWorkers {
  std::vector<std::string> workers;
  std::string key;
};

// None when `job` holds (`placed`) as many workers as it asks for, or none
// of `idle` (offering its device) is left to take.
std::optional<GrowthWorkers> GrowthWorkersFor(
    const chimera::v1::Job& job, const std::vector<std::string>& placed,
    const std::vector<std::string>& idle);

// Why `job` should move from its plan `now` to `bigger`: "growing from 3 to
// 4 workers (zb-h2 W=1 D=3 to chimera W=1 D=4, predicted 1.32x as fast)";
// none when `bigger` is predicted less than its threshold faster, or either
// plan has no prediction.
std::optional<std::string> WorthGrowing(const chimera::v1::Job& job,
                                        const chimera::v1::Plan& now,
                                        const chimera::v1::Plan& bigger);

// A run's last verdict on growing: for the workers `key` names, why it
// should (none: it should not).
struct Growth {
  std::string key;
  std::optional<std::string> reason;
};

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_JOB_GROWTH_H_
