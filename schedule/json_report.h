// The machine-readable report of `chimera schedule -o json`: the simulation's
// figures, and every worker's instructions with their simulated times, in
// columns (one array per field, index i the worker's i-th instruction), so
// that a D = 64, N = 512 schedule of 195,000 instructions takes 4 MB:
//
//   {"scheme" (when known), "depth", "width", "micro_batches", "chunks",
//    "updates", "steps" (an asynchronous schedule's update rule and the
//    steps unrolled, micro_batches covering them all; left out of
//    synchronous ones), "makespan", "bubble_ratio", "exposed_allreduce",
//    "critical_path": {"forwards", "backwards"},
//    "ops": ["FORWARD", "BACKWARD", ...],
//    "workers": [{"rank", "busy", "idle", "bubble_ratio", "peak_activations",
//                 "exposed_allreduce", "instructions": {
//                   "count": the worker's number of instructions,
//                   "op": [0, 2, ...],  (indices into "ops")
//                   "chunk", "stage", "peer" (-1 where none): [int, ...],
//                   "micro_batches": [0, 1, [], [2, 3], ...],  (one index, or
//                                     an array where none or several)
//                   "start", "end": [number, ...],
//                   "part", "num_parts", "recompute": left out of a worker
//                                     whose instructions all hold the
//                                     defaults 0, 1 and false}}]}
//
// Numbers are written in their shortest form that reads back exactly.
//
//   std::string json = JsonReport(schedule, simulation);
#ifndef CHIMERA_SCHEDULE_JSON_REPORT_H_
#define CHIMERA_SCHEDULE_JSON_REPORT_H_

#include <string>

#include "absl/strings/string_view.h"
#include "schedule/program.h"
#include "schedule/simulator.h"

namespace chimera::schedule {

// `result` must come from Simulate(schedule, ...); `scheme` names the
// generator (empty for a schedule read from CSV: no "scheme" field).
std::string JsonReport(const Schedule& schedule, const SimulationResult& result,
                       absl::string_view scheme = "");

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_JSON_REPORT_H_
