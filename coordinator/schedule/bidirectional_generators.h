// Generators with model replicas running in opposite directions through the
// same workers: Chimera (2f pipelines, section 3), GEMS and MixPipe. Called
// by GenerateSchedule with validated parameters.
//
// Chunks are model replicas (ChunkLayout::kReplicas): chunk 2i is down
// pipeline i, chunk 2i+1 its up pipeline. Down pipeline i maps stage s to
// position (s + i*D/f) mod D, its up pipeline to D-1 minus that (§3.6).
#ifndef CHIMERA_COORDINATOR_SCHEDULE_BIDIRECTIONAL_GENERATORS_H_
#define CHIMERA_COORDINATOR_SCHEDULE_BIDIRECTIONAL_GENERATORS_H_

#include "absl/status/statusor.h"
#include "coordinator/schedule/program.h"
#include "coordinator/schedule/schedule_params.h"

namespace chimera::schedule {

// Direct concatenation (and N <= D) merges the 1F1B pipelines on the slot
// grid of forward = backward: a pipeline's m-th micro-batch of basic unit u
// runs forward on stage s at slot 2D*u + 2m + s and backward at
// 2D*u + 2m + 2D-1-s, conflict-free for even D; the simulator retimes that
// order for the real costs. Forward doubling and backward halving (N > D)
// use the list scheduler, each pipeline 1F1B, backward first.
absl::StatusOr<Schedule> GenerateChimera(const ScheduleParams& params);

// Two replicas, down and up; micro-batch m runs on replica m mod 2; at most
// one micro-batch per replica in flight.
absl::StatusOr<Schedule> GenerateGems(const ScheduleParams& params);

// Chimera's placement with K micro-batches (K/2 per pipeline) injected
// before the first backward; the middle workers D/2-1 and D/2 then run
// their next Gamma forwards ahead of ready backwards (2F1B). K = D with
// Gamma = 0 is Chimera's exact order (the paper's 5D-4 at B = 2F); smaller
// K is list-scheduled and does not yet reproduce the paper's 8D-3K-4-3*Gamma.
absl::StatusOr<Schedule> GenerateMixPipe(const ScheduleParams& params);

}  // namespace chimera::schedule

#endif  // CHIMERA_COORDINATOR_SCHEDULE_BIDIRECTIONAL_GENERATORS_H_
