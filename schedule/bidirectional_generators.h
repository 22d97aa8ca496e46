// Generators with model replicas running in opposite directions through the
// same workers: Chimera (2f pipelines, section 3), GEMS and MixPipe. Called
// by GenerateSchedule with validated parameters.
//
// Chunks are model replicas (ChunkLayout::kReplicas): chunk 2i is down
// pipeline i, chunk 2i+1 its up pipeline. Down pipeline i maps stage s to
// position (s + i*D/f) mod D, its up pipeline to D-1 minus that (§3.6).
#ifndef CHIMERA_SCHEDULE_BIDIRECTIONAL_GENERATORS_H_
#define CHIMERA_SCHEDULE_BIDIRECTIONAL_GENERATORS_H_

#include "absl/status/statusor.h"
#include "schedule/program.h"
#include "schedule/schedule_params.h"

namespace chimera::schedule {

// Chimera's exact order (sections 3.1, 3.5): basic units of D forward items
// merged on a slot grid, a pipeline's m-th item forward on stage s at slot
// 2m + s and its backward at 2m + 2D-1-s, conflict-free for even D. Direct
// concatenation (and N <= D): an item is one micro-batch, units start 2D
// slots apart. Forward doubling (N > D): an item is two micro-batches in
// one forward, answered by two backward chunks of one recomputing
// micro-batch each (the second at 2m + 3D-1-s), units 3D slots apart; a
// residual of at most D micro-batches forms a direct unit. Backward halving
// (N > D): the same order with single-micro-batch forwards and the two
// chunks holding the two halves of each backward. Equalized orders are
// timed by TimeFixedOrder.
absl::StatusOr<Schedule> GenerateChimera(const ScheduleParams& params);

// Two replicas, down and up; micro-batch m runs on replica m mod 2; at most
// one micro-batch per replica in flight. The other replica's micro-batch
// starts as soon as its first stage is free rather than after the first
// one's forward pass, so the bubble ratio ((D-2)/D at backward = 2x
// forward) is below the paper's approximation (D-1)/(D+1/2).
absl::StatusOr<Schedule> GenerateGems(const ScheduleParams& params);

// Chimera's placement, every worker stashing at most K + Gamma micro-batches
// (the paper's eq. 4 budget). K = D with Gamma = 0 is Chimera's exact order
// (the paper's 5D-4 at B = 2F). Otherwise basic units of D micro-batches run
// one after another on every worker, each in the faster of two orders within
// the budget: Chimera's slot grid with each pipeline's micro-batches
// injected K/2 at a time, every next K/2 waiting D-K slots more; or a list
// order in which each worker runs a ready forward ahead of a ready backward
// (2F1B) while under budget, keeping one slot for a pipeline that still has
// to pass. K maximizing (K = 2(D-1), N > D) is that list order over all
// micro-batches with a budget of 3D/2 - 1. Orders are timed by
// TimeFixedOrder. docs/schedules.md lists where this is slower than the
// paper's 8D-3K-4-3*Gamma.
absl::StatusOr<Schedule> GenerateMixPipe(const ScheduleParams& params);

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_BIDIRECTIONAL_GENERATORS_H_
