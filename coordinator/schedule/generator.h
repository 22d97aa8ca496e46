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
#ifndef CHIMERA_COORDINATOR_SCHEDULE_GENERATOR_H_
#define CHIMERA_COORDINATOR_SCHEDULE_GENERATOR_H_

#include <string>

#include "absl/status/statusor.h"
#include "coordinator/schedule/program.h"
#include "coordinator/schedule/schedule_params.h"

namespace chimera::schedule {

absl::StatusOr<Schedule> GenerateSchedule(const ScheduleParams& params);

// Generic name of a parameter in error messages: "depth", "micro-batches",
// "mixpipe-k", ... (the CLI flag without dashes).
std::string ScheduleParamName(ScheduleParam param);

}  // namespace chimera::schedule

#endif  // CHIMERA_COORDINATOR_SCHEDULE_GENERATOR_H_
