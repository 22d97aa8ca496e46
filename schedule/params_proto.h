// ScheduleParams to and from the public protos: the one translation of a
// job's spec.parallelism (used by the job validator, the fixed-plan path, the
// planner and `chimera schedule`'s flags), and the schedule fields of a
// chimera.v1.Plan in both directions (written by the coordinator, read back
// by the worker runtime).
//
//   SpecParams fixed;
//   FieldErrors errors = ScheduleParamsFromSpec(spec.parallelism(),
//                                               spec.training(), &fixed);
//   if (fixed.FixesSchedule()) ... else search what it leaves open
//   SetScheduleParams(params, micro_batch_size, &plan);
//   ASSIGN_OR_RETURN(ScheduleParams params, ScheduleParamsOf(plan));
#ifndef CHIMERA_SCHEDULE_PARAMS_PROTO_H_
#define CHIMERA_SCHEDULE_PARAMS_PROTO_H_

#include <functional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "chimera/v1/job.pb.h"
#include "chimera/v1/plan.pb.h"
#include "common/field_errors.h"
#include "schedule/schedule_params.h"

namespace chimera::schedule {

// What a job's spec fixes of its schedule.
struct SpecParams {
  // The values the spec gives; the others keep ScheduleParams' defaults.
  ScheduleParams params;
  // The parameters the spec gives; the rest are the planner's to choose.
  std::set<ScheduleParam> given;

  bool Gives(ScheduleParam param) const { return given.count(param) > 0; }
  // Scheme, depth, width and micro-batches all given: no search is needed.
  bool FixesSchedule() const;
};

// A parameter's job-file path ("spec.parallelism.pipeline"): how the
// translation names parameters unless told otherwise.
std::string JobFieldPath(ScheduleParam param);

// Reads spec.parallelism, and from spec.training the recompute switch and
// the micro-batch size (which gives the micro-batches when data is fixed).
// Every problem is returned, each named by `name`: sizes out of range, names
// that do not parse, a knob of another scheme, and, once scheme and depth are
// known, the scheme's own rules (ValidateScheduleParams; sizes the spec
// leaves open are checked at a value the planner could pick: width 1, or 2
// with sharding, micro-batches 2D). `*out` is complete only when no error is
// returned.
FieldErrors ScheduleParamsFromSpec(const chimera::v1::ParallelismSpec& parallelism,
                                   const chimera::v1::TrainingSpec& training,
                                   SpecParams* out,
                                   const ParamNamer& name = JobFieldPath);

// Sets `knob`'s field of `spec` to its value in `params`: how `chimera
// schedule` puts the knobs its flags give through the same translation as a
// job file.
void SetSpecKnob(const Knob& knob, const ScheduleParams& params,
                 chimera::v1::ParallelismSpec* spec);

// Writes the scheme, sizes and knobs (not partition, placement or
// prediction).
void SetScheduleParams(const ScheduleParams& params, int micro_batch_size,
                       chimera::v1::Plan* plan);

// INVALID_ARGUMENT naming the plan field when a name does not parse or the
// parameters are not a valid schedule.
absl::StatusOr<ScheduleParams> ScheduleParamsOf(const chimera::v1::Plan& plan);

// The workers `plan` runs on: width x depth, or width x the sum of its
// replication.
int PlanWorkerCount(const chimera::v1::Plan& plan);

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_PARAMS_PROTO_H_
