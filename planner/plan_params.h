// The plan of a job whose spec fixes its parallelism, so no search is
// needed.
//
//   if (std::optional<Plan> plan = FixedPlan(job)) ... else SearchPlans(...)
#ifndef CHIMERA_PLANNER_PLAN_PARAMS_H_
#define CHIMERA_PLANNER_PLAN_PARAMS_H_

#include <optional>

#include "chimera/v1/job.pb.h"
#include "chimera/v1/plan.pb.h"

namespace chimera::planner {

// The plan of a (valid) job that fixes schedule, pipeline, data and either
// microBatches or microBatchSize, with an even partition; nullopt when the
// job leaves any of them to the planner.
std::optional<chimera::v1::Plan> FixedPlan(const chimera::v1::TrainJob& job);

}  // namespace chimera::planner

#endif  // CHIMERA_PLANNER_PLAN_PARAMS_H_
