// The schedule parameters a Plan carries, in both directions, and the plan
// of a job whose spec fixes its parallelism so no search is needed.
//
//   if (std::optional<Plan> plan = FixedPlan(job)) ... else SearchPlans(...)
//   ASSIGN_OR_RETURN(schedule::ScheduleParams params, ScheduleParamsOf(*plan));
#ifndef CHIMERA_COORDINATOR_PLANNER_PLAN_PARAMS_H_
#define CHIMERA_COORDINATOR_PLANNER_PLAN_PARAMS_H_

#include <optional>

#include "absl/status/statusor.h"
#include "chimera/v1/job.pb.h"
#include "chimera/v1/plan.pb.h"
#include "coordinator/schedule/schedule_params.h"

namespace chimera::planner {

// Writes the scheme, sizes and knobs (not partition, placement or
// prediction).
void SetScheduleParams(const schedule::ScheduleParams& params,
                       int micro_batch_size, chimera::v1::Plan* plan);

// INVALID_ARGUMENT naming the plan field when a name does not parse or the
// parameters are not a valid schedule.
absl::StatusOr<schedule::ScheduleParams> ScheduleParamsOf(
    const chimera::v1::Plan& plan);

// The plan of a (valid) job that fixes schedule, pipeline, data and either
// microBatches or microBatchSize, with an even partition; nullopt when the
// job leaves any of them to the planner.
std::optional<chimera::v1::Plan> FixedPlan(const chimera::v1::TrainJob& job);

}  // namespace chimera::planner

#endif  // CHIMERA_COORDINATOR_PLANNER_PLAN_PARAMS_H_
