// Generates one program per worker from a scheme and its parameters.
//
//   ScheduleParams params;
//   params.scheme = Scheme::kChimera;
//   params.depth = 4;
//   params.micro_batches = 4;
//   ASSIGN_OR_RETURN(Schedule schedule, GenerateSchedule(params));
//   RETURN_IF_ERROR(ValidateSchedule(schedule));
//
// Invalid parameters return InvalidArgument naming the parameter (as in
// ScheduleParamName), its value and what is allowed. A generated schedule
// always passes ValidateSchedule; the tests prove it for every scheme over
// random parameters.
#ifndef CHIMERA_SCHEDULE_GENERATOR_H_
#define CHIMERA_SCHEDULE_GENERATOR_H_

#include <string>

#include "absl/status/statusor.h"
#include "schedule/program.h"
#include "schedule/schedule_params.h"

namespace chimera::schedule {

absl::StatusOr<Schedule> GenerateSchedule(const ScheduleParams& params);

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_GENERATOR_H_
