// The machine-readable report of `chimera schedule -o json`. Field names are
// stable:
//   {"makespan", "bubble_ratio", "exposed_allreduce",
//    "critical_path": {"forwards", "backwards"},
//    "workers": [{"rank", "busy", "idle", "bubble_ratio", "peak_activations",
//                 "exposed_allreduce", "instructions": [{"op", "chunk",
//                 "stage", "micro_batches", "peer", "part", "num_parts",
//                 "recompute", "start", "end"}]}]}
//
//   std::string json = JsonReport(schedule, simulation);
#ifndef CHIMERA_SCHEDULE_JSON_REPORT_H_
#define CHIMERA_SCHEDULE_JSON_REPORT_H_

#include <string>

#include "schedule/program.h"
#include "schedule/simulator.h"

namespace chimera::schedule {

// `result` must come from Simulate(schedule, ...).
std::string JsonReport(const Schedule& schedule, const SimulationResult& result);

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_JSON_REPORT_H_
