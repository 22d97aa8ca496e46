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

// ZB-H2 (arXiv 2401.10241, section 3.1) within one flushed iteration: stage
// i may hold 2(D-i)-1 micro-batches, ZB-H2's memory, and runs a ready B
// first, then a forward, then a W. Where B costs more than W it beats
// ZB-H1 (whose bubble is (D-1)(F+B-W)) down to the flushed bound
// N(F+B+W) + (D-1)F; at F = B = W both reach that bound. Why the paper's
// zero bubble needs more: docs/schedules.md.
absl::StatusOr<Schedule> GenerateZeroBubbleH2(const ScheduleParams& params);

// zb-auto: the same list scheduler with every stage holding at most
// params.activation_limit micro-batches (0: no limit), the automatic
// zero-bubble scheduler's idea of placing W's within a memory budget.
absl::StatusOr<Schedule> GenerateZeroBubbleAuto(const ScheduleParams& params);

// ZB-V (arXiv 2401.10241, section 6; torch.distributed.pipelining's
// ScheduleZBVZeroBubble, op for op): 2D model stages in a V, chunk 0 down
// positions 0..D-1 and chunk 1 back up from D-1 to 0. At unit costs it idles
// only the D-1 slots the V's descent takes to reach its last position, and
// it holds at most 2D chunk micro-batches a worker: 1F1B's peak, as each
// chunk is half a stage.
absl::StatusOr<Schedule> GenerateZeroBubbleV(const ScheduleParams& params);

// DualPipeV (DeepSeek's DualPipe repository, "cut-in-half" DualPipe) on
// ZB-V's V, in its eight steps, with N >= 2D. Its overlapped
// forward-backward pairs run one after the other here, and some of its
// backwards are whole BACKWARDs. Bubble: docs/schedules.md.
absl::StatusOr<Schedule> GenerateDualPipeV(const ScheduleParams& params);

// chimera-zb: Chimera's bidirectional pipelines (direct concatenation) with
// every backward split, its B's where Chimera runs its backwards and its
// W's deferred into the bubbles, holding at most D micro-batches a worker.
// Bubble and memory: docs/schedules.md, "Chimera with the split".
absl::StatusOr<Schedule> GenerateChimeraZeroBubble(
    const ScheduleParams& params);

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_ZERO_BUBBLE_GENERATORS_H_
