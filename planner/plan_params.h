// What a job's spec decides about its plan before any search: the plan of
// a job that fixes its parallelism, and how many workers a job can use.
//
//   if (std::optional<Plan> plan = FixedPlan(job)) ... else SearchPlans(...)
//   const int workers = WorkersToUse(job, idle_workers);
//   SearchPlans(ShrunkJob(job, workers_left), ...);  // after a loss
#ifndef CHIMERA_PLANNER_PLAN_PARAMS_H_
#define CHIMERA_PLANNER_PLAN_PARAMS_H_

#include <optional>

#include "chimera/v1/job.pb.h"
#include "chimera/v1/plan.pb.h"

namespace chimera::planner {

// The plan of a (valid) job that fixes schedule, pipeline, data and either
// microBatches or microBatchSize, with an even partition (with a
// replication, each stage's blocks in proportion to its workers); nullopt
// when the job leaves any of them to the planner.
std::optional<chimera::v1::Plan> FixedPlan(const chimera::v1::TrainJob& job);

// The workers a (valid) job runs on when `available` can be had: its
// spec.resources.workers, or where that is left open (0) the most of them
// that its fixed pipeline (or replication's workers) x data (or a multiple
// of whichever it fixes) allows. 0 when `available` is too few.
int WorkersToUse(const chimera::v1::TrainJob& job, int available);

// The fewest workers a (valid) job can run on: its spec.resources.workers,
// or where that is left open its fixed pipeline x data (or whichever it
// fixes), at least 1.
int MinimumWorkers(const chimera::v1::TrainJob& job);

// `job` as planned on `workers`, fewer than its spec.resources.workers
// (after a loss): that many workers, and its parallelism left to the
// planner, since a fixed scheme, pipeline or width was chosen for the full
// count. Model, data and training, the global batch among them, stay: each
// step is the same mathematics on any plan.
chimera::v1::TrainJob ShrunkJob(chimera::v1::TrainJob job, int workers);

}  // namespace chimera::planner

#endif  // CHIMERA_PLANNER_PLAN_PARAMS_H_
