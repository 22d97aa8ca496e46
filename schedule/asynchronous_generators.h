// The asynchronous schedules: PipeDream and PipeDream-2BW (Chimera paper,
// Table 2), pipelines that never flush. Their order is 1F1B's without the
// cool-down: once stage i has taken D - i forwards it alternates a backward
// and a forward, and the next step's forwards follow this step's without a
// pause. Each is generated as one repeating step (Topology::repeating): step
// t's program on stage i holds the forwards of step t's micro-batches and,
// before each, the backward D - i micro-batches earlier, the first D - i of
// which belong to step t - 1. Called by GenerateSchedule with validated
// parameters (N >= D, W = 1).
#ifndef CHIMERA_SCHEDULE_ASYNCHRONOUS_GENERATORS_H_
#define CHIMERA_SCHEDULE_ASYNCHRONOUS_GENERATORS_H_

#include "absl/status/statusor.h"
#include "schedule/program.h"
#include "schedule/schedule_params.h"

namespace chimera::schedule {

// PipeDream: every backward is followed by an update (UpdateRule::kStashed).
absl::StatusOr<Schedule> GeneratePipeDream(const ScheduleParams& params);

// PipeDream-2BW: an update after the backward of each step's last
// micro-batch (UpdateRule::kDoubleBuffered).
absl::StatusOr<Schedule> GeneratePipeDream2Bw(const ScheduleParams& params);

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_ASYNCHRONOUS_GENERATORS_H_
