// The split-backward (zero-bubble) schedules, whose backwards are two ops:
// BACKWARD_INPUT (B), which the previous stage waits for, and
// BACKWARD_WEIGHT (W), which nobody waits for and so fills the bubbles.
// Called by GenerateSchedule with validated parameters.
#ifndef CHIMERA_SCHEDULE_ZERO_BUBBLE_GENERATORS_H_
#define CHIMERA_SCHEDULE_ZERO_BUBBLE_GENERATORS_H_

#include "absl/status/statusor.h"
#include "schedule/program.h"
#include "schedule/schedule_params.h"

namespace chimera::schedule {

// ZB-H1 (arXiv 2401.10241, section 3.1), stage s on position s, in the
// paper's order: stage i runs 1F1B's D - i warm-up forwards, then per
// micro-batch its B, the W of the micro-batch i before it, and the next
// forward; the i W's left fill the drain. It holds at most D micro-batches
// a worker, 1F1B's peak, and at unit costs has a third of 1F1B's bubble:
// (D-1)/(3N+D-1).
absl::StatusOr<Schedule> GenerateZeroBubbleH1(const ScheduleParams& params);

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_ZERO_BUBBLE_GENERATORS_H_
