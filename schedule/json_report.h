// The machine-readable report of `chimera schedule -o json`. Field names are
// stable:
//   {"scheme" (when known), "depth", "width", "micro_batches", "chunks",
//    "makespan", "bubble_ratio", "exposed_allreduce",
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
