// MixPipe (the MixPipe paper): Chimera's down and up pipelines with a
// budget on the micro-batches every worker stashes. Called by
// GenerateSchedule with validated parameters.
#ifndef CHIMERA_SCHEDULE_MIXPIPE_GENERATOR_H_
#define CHIMERA_SCHEDULE_MIXPIPE_GENERATOR_H_

#include "absl/status/statusor.h"
#include "schedule/program.h"
#include "schedule/schedule_params.h"

namespace chimera::schedule {

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

#endif  // CHIMERA_SCHEDULE_MIXPIPE_GENERATOR_H_
