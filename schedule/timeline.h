// Drawings of a simulated schedule, like the papers' figures: one row per
// worker, a box per forward/backward labelled with its micro-batch(es); a
// split backward's halves apart from whole ones (ComputeLetter: I input
// half, W weight half). Even and odd chunks are told apart: in text by
// letter case (F/B/I/W even, f/b/i/w odd), in SVG by colour. What a chunk
// is depends on the schedule: Chimera's down (even) and up (odd) pipelines,
// a looping schedule's model chunks; a single pipeline has one chunk
// (ChunkNames).
//
//   std::cout << TextTimeline(schedule, simulation, "chimera D=4 N=4",
//                             "time units");
//   std::string svg = SvgTimeline(schedule, simulation, "chimera D=4 N=4");
//   std::string both = SvgTimelines(schedule, {{"measured", &measured},
//                                              {"simulated", &simulation}},
//                                   "step 3", "seconds");
#ifndef CHIMERA_SCHEDULE_TIMELINE_H_
#define CHIMERA_SCHEDULE_TIMELINE_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "schedule/program.h"
#include "schedule/simulator.h"

namespace chimera::schedule {

// What a schedule's even and odd chunks are, for legends: {"down pipeline",
// "up pipeline"} for bidirectional pipelines, {"even chunk", "odd chunk"}
// for looping ones, nullopt for a single pipeline (one chunk).
std::optional<std::pair<std::string, std::string>> ChunkNames(const Topology& topology);

// "forward", "backward", "backward's input half", "backward's weight half".
std::string OpLegendName(OpKind op);

// The compute ops `schedule` has, in legend order: FORWARD, BACKWARD,
// BACKWARD_INPUT, BACKWARD_WEIGHT.
std::vector<OpKind> ComputeOpsOf(const Schedule& schedule);

// Widest ASCII timeline, in cells; longer schedules are drawn coarser.
inline constexpr int kMaxTimelineCells = 400;

// A summary table (makespan, bubble ratio, critical path, per-worker busy,
// idle, bubble ratio, peak activations, exposed allreduce) and an ASCII
// timeline whose legend gives a column's width in `time_unit` ("time units"
// for unit costs, "s" for a job's predicted ones). `result` must come from
// Simulate(schedule, ...).
std::string TextTimeline(const Schedule& schedule,
                         const SimulationResult& result,
                         absl::string_view title, absl::string_view time_unit);

// A standalone SVG document: title, time axis, legend, one row per worker.
std::string SvgTimeline(const Schedule& schedule,
                        const SimulationResult& result,
                        absl::string_view title);

// One of the timelines SvgTimelines draws: its heading and its timing of
// the schedule's programs (a simulation, or a measurement in the same
// terms); `result` must outlive the call.
struct TimelinePanel {
  std::string title;
  const SimulationResult* result = nullptr;
};

// Several timelines of the same schedule in one SVG document, one above the
// other, each with its heading, summary, rows and time axis, all on one
// scale (the longest makespan) so that they compare at a glance; one legend
// at the foot. `unit` names the time axis ("seconds"; empty: plain "time").
std::string SvgTimelines(const Schedule& schedule,
                         const std::vector<TimelinePanel>& panels,
                         absl::string_view title, absl::string_view unit);

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_TIMELINE_H_
