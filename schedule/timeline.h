// Drawings of a simulated schedule, like the papers' figures: one row per
// worker, a box per forward/backward labelled with its micro-batch(es).
// Down pipelines (even chunks) and up pipelines (odd chunks) are told apart:
// in text by letter case (F/B down, f/b up), in SVG by colour.
//
//   std::cout << TextTimeline(schedule, simulation, "chimera D=4 N=4");
//   std::string svg = SvgTimeline(schedule, simulation, "chimera D=4 N=4");
#ifndef CHIMERA_SCHEDULE_TIMELINE_H_
#define CHIMERA_SCHEDULE_TIMELINE_H_

#include <string>

#include "absl/strings/string_view.h"
#include "schedule/program.h"
#include "schedule/simulator.h"

namespace chimera::schedule {

// Widest ASCII timeline, in cells; longer schedules are drawn coarser.
inline constexpr int kMaxTimelineCells = 400;

// A summary table (makespan, bubble ratio, critical path, per-worker busy,
// idle, bubble ratio, peak activations, exposed allreduce) and an ASCII
// timeline. `result` must come from Simulate(schedule, ...).
std::string TextTimeline(const Schedule& schedule,
                         const SimulationResult& result,
                         absl::string_view title);

// A standalone SVG document: title, time axis, legend, one row per worker.
std::string SvgTimeline(const Schedule& schedule,
                        const SimulationResult& result,
                        absl::string_view title);

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_TIMELINE_H_
