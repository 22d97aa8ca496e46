// Generators with model replicas running in opposite directions through the
// same workers: Chimera (2f pipelines, section 3) and GEMS, and the pieces
// they share with MixPipe (mixpipe_generator.h). Called by GenerateSchedule
// with validated parameters.
//
// Chunks are model replicas (ChunkLayout::kReplicas): chunk 2i is down
// pipeline i, chunk 2i+1 its up pipeline. Down pipeline i maps stage s to
// position (s + i*D/f) mod D, its up pipeline to D-1 minus that (§3.6).
#ifndef CHIMERA_SCHEDULE_BIDIRECTIONAL_GENERATORS_H_
#define CHIMERA_SCHEDULE_BIDIRECTIONAL_GENERATORS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "schedule/program.h"
#include "schedule/program_builder.h"
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

struct Bidirectional {
  Topology topology;
  Placement placement;
};

// 2f replicas: down pipeline i = chunk 2i, up pipeline i = chunk 2i+1.
Bidirectional MakeBidirectional(const ScheduleParams& params, int f);

// Splits items 0..count-1 into basic units of `unit_size`, and each unit
// over `pipelines` pipelines as evenly as possible, in contiguous blocks
// (the first pipelines take the remainder). Result [unit][pipeline] lists
// item ids in order.
std::vector<std::vector<std::vector<int>>> RouteUnits(int count, int unit_size,
                                                      int pipelines);

// Chimera's compute order per position (see GenerateChimera), on the grid
// where every op takes one slot; `b` from MakeBidirectional(params, f).
absl::StatusOr<std::vector<std::vector<ComputeOp>>> ChimeraSlotOrder(
    const ScheduleParams& params, const Bidirectional& b);

// A forward or backward of `mbs` on `ref` filling grid slot `slot`.
ComputeOp SlotOp(OpKind kind, StageRef ref, MicroBatches mbs, int64_t slot);

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_BIDIRECTIONAL_GENERATORS_H_
