// Generators whose stages sit on positions in order, stage s of every chunk
// on position s: GPipe, 1F1B (DAPPLE), and the looping pipelines with v
// chunks per worker (interleaved = depth-first, breadth-first). Called by
// GenerateSchedule with validated parameters.
#ifndef CHIMERA_SCHEDULE_LINEAR_GENERATORS_H_
#define CHIMERA_SCHEDULE_LINEAR_GENERATORS_H_

#include "absl/status/statusor.h"
#include "schedule/program.h"
#include "schedule/schedule_params.h"

namespace chimera::schedule {

// GPipe: all forwards, then all backwards.
absl::StatusOr<Schedule> GenerateGpipe(const ScheduleParams& params);

// DAPPLE early backward: stage i admits K_i forwards before its first
// backward, K_i = min(D-i, N) (PA) or min(2(D-i)-1, N) (PB), then 1F1B.
absl::StatusOr<Schedule> GenerateOneFOneB(const ScheduleParams& params);

// Looping placement, v = params.chunks chunks per worker. Depth-first: the
// exact op order of Megatron-LM's interleaved 1F1B (N a multiple of D).
// Breadth-first: every micro-batch through a chunk before the next chunk,
// forward-first.
absl::StatusOr<Schedule> GenerateInterleaved(const ScheduleParams& params);
absl::StatusOr<Schedule> GenerateBreadthFirst(const ScheduleParams& params);

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_LINEAR_GENERATORS_H_
