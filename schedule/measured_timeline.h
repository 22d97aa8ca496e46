// A measured run of a schedule's programs in the simulator's terms, so that
// the drawings and figures that read a SimulationResult read a measurement
// as well, and the op costs that replay a measurement in the simulator: the
// schedule's timing if every op took its measured mean and communication
// were free, to compare the measurement with.
//
//   // spans[r][i]: when rank r ran its instruction i, in seconds.
//   ASSIGN_OR_RETURN(SimulationResult measured, MeasuredResult(schedule,
//   spans)); ASSIGN_OR_RETURN(SimulationResult ideal,
//                    Simulate(schedule, MeasuredCosts(schedule, measured)));
//   SvgTimelines(schedule, {{"measured", &measured}, {"simulated", &ideal}},
//                "step 3", "seconds");
#ifndef CHIMERA_SCHEDULE_MEASURED_TIMELINE_H_
#define CHIMERA_SCHEDULE_MEASURED_TIMELINE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "schedule/program.h"
#include "schedule/simulator.h"

namespace chimera::schedule {

// `spans` has one list per worker of `schedule` and one span per
// instruction (end >= start, on one clock); the result's times start at the
// earliest span's start. Busy time, idle time and bubble ratios are the
// simulator's definitions, so they compare; peak activations are counted
// from the program order; the critical path is unknown (0). INVALID_ARGUMENT
// naming the rank and instruction that does not fit.
absl::StatusOr<SimulationResult> MeasuredResult(
    const Schedule& schedule,
    const std::vector<std::vector<InstructionTiming>>& spans);

// Per model stage, the mean measured forward time per micro-batch and
// backward time per whole micro-batch (without the recomputed forward, which
// the simulator adds itself) and shard step (SHARD_STEP, 0 where none ran),
// and the mean optimizer step; no p2p or collective cost. A stage that has
// no measured forward or backward keeps the default costs.
CostModel MeasuredCosts(const Schedule& schedule,
                        const SimulationResult& measured);

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_MEASURED_TIMELINE_H_
