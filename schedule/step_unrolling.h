// Asynchronous schedules run one repeating step (Topology::repeating):
// UnrollSteps writes out the steps a run takes, so that the validator and
// the simulator, which know nothing of steps, can read them like any other
// schedule. Any schedule's steps written out back to back give its step
// once a run is under way (SimulateSteadyStep).
//
//   ASSIGN_OR_RETURN(Schedule steps, UnrollSteps(repeating, 3));
//   ASSIGN_OR_RETURN(SimulationResult run, Simulate(steps, costs));
#ifndef CHIMERA_SCHEDULE_STEP_UNROLLING_H_
#define CHIMERA_SCHEDULE_STEP_UNROLLING_H_

#include <vector>

#include "absl/status/statusor.h"
#include "schedule/program.h"
#include "schedule/simulator.h"

namespace chimera::schedule {

// The programs of `steps` steps in a row and of the drain after the last,
// each worker's as one list. Step s's micro-batch j becomes s * N + j, so
// the result has steps * N micro-batches and Topology::steps = `steps`; the
// first step leaves out the ops on the previous step's micro-batches, and
// the drain holds only those. A synchronous schedule's steps are whole and
// its drain empty: its steps run back to back, each starting wherever the
// last one's order allows. InvalidArgument unless `schedule` is a
// schedule of one step whose micro-batch indices lie in [-N, N) (in [0, N)
// for a synchronous one) and steps >= 1.
absl::StatusOr<Schedule> UnrollSteps(const Schedule& schedule, int steps);

// A schedule's step once steps run back to back: how long it takes, and the
// share of it a worker does not compute (the mean over workers). A
// repeating schedule's step once the pipeline is full; a synchronous one's
// is shorter than its one step alone where a worker can start the next step
// before another worker finishes this one (no gradient sum joins them).
struct SteadyStep {
  double seconds = 0.0;
  double bubble_ratio = 0.0;
  // Each worker's, by rank.
  std::vector<double> worker_bubble_ratios;
};

// Simulated as what a third step adds to a run of two.
absl::StatusOr<SteadyStep> SimulateSteadyStep(const Schedule& schedule,
                                              const CostModel& costs);

// The simulation of one step of `schedule`. A repeating one's steps overlap:
// one step and the drain give its compute and memory, and its makespan and
// bubbles (each worker's busy time is no longer consistent with them) are
// those of a step once the pipeline is full.
absl::StatusOr<SimulationResult> SimulateStep(const Schedule& schedule,
                                              const CostModel& costs);

// Whether `inst` acts on the previous step's micro-batches (its indices are
// negative) in a repeating schedule.
bool ActsOnPreviousStep(const Instruction& inst);

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_STEP_UNROLLING_H_
