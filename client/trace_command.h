// `chimera trace JOB [--step S] --out FILE [--format chrome|svg]`: one
// step's measured timeline of every rank of a running job, written as a
// Chrome trace (by default) or, for a FILE ending in .svg, as an SVG with the
// simulator's timeline of the same programs below it (client/job_trace.h).
// It waits for the ranks to finish the step: the next step without --step.
#ifndef CHIMERA_CLIENT_TRACE_COMMAND_H_
#define CHIMERA_CLIENT_TRACE_COMMAND_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>

#include "client/coordinator_client.h"

namespace chimera::client {

// The longest `chimera trace` waits for its step unless told otherwise.
inline constexpr absl::Duration kDefaultTraceWait = absl::Minutes(5);

// Registers `trace` on `app`; `connect` opens the connection the global
// flags describe, `json` says whether -o json was asked for.
void AddTraceCommand(
    CLI::App& app, std::function<std::unique_ptr<CoordinatorClient>()> connect,
    std::function<bool()> json);

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_TRACE_COMMAND_H_
