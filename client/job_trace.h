// A job's measured step (JobService.TraceJob) as a file a user opens: a
// Chrome trace (chrome://tracing, ui.perfetto.dev) with one track per rank,
// or an SVG that draws the measured timeline above the simulator's timeline
// of the same programs, so the bubbles and the distance from the plan show.
// The ranks' programs are regenerated from the trace's plan with the
// schedule engine; they label each measured instruction.
//
//   ASSIGN_OR_RETURN(chimera::v1::JobTrace trace, client.Trace(id, step,
//   wait)); RETURN_IF_ERROR(WriteTraceFile(trace, "trace.json",
//   TraceFormatOf("trace.json")));
#ifndef CHIMERA_CLIENT_JOB_TRACE_H_
#define CHIMERA_CLIENT_JOB_TRACE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chimera/v1/service.pb.h"

namespace chimera::client {

inline constexpr char kChromeTraceFormat[] = "chrome";
inline constexpr char kSvgTraceFormat[] = "svg";

// "svg" for a file name ending in .svg, "chrome" for any other.
std::string TraceFormatOf(absl::string_view path);

// Trace Event Format JSON: one process (the job), one thread per rank named
// "rank R (worker W)", a complete event ("ph": "X") per instruction with
// ts/dur in microseconds from the earliest rank's start, args op, chunk,
// stage, model_stage, micro_batches (and peer, part where they apply).
// INVALID_ARGUMENT when a rank's timeline does not fit its program.
absl::StatusOr<std::string> ChromeTrace(const chimera::v1::JobTrace& trace);

// The measured timeline and, below it on the same time scale, the
// simulation of the same programs with the measured mean op times and free
// communication (schedule::MeasuredCosts).
absl::StatusOr<std::string> TraceSvg(const chimera::v1::JobTrace& trace);

// OK when a trace could be written to `path` (its directory exists), so a
// command can refuse a bad path before it waits; INVALID_ARGUMENT otherwise.
absl::Status CheckTracePath(const std::string& path);

// Writes `trace` to `path` in `format` (kChromeTraceFormat or
// kSvgTraceFormat); INVALID_ARGUMENT for another format, an error naming
// the path when it cannot be written.
absl::Status WriteTraceFile(const chimera::v1::JobTrace& trace,
                            const std::string& path, absl::string_view format);

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_JOB_TRACE_H_
