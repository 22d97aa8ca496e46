#include "client/trace_command.h"

#include <iostream>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/cli_errors.h"
#include "client/job_reference.h"
#include "client/job_trace.h"
#include "common/number_checks.h"
#include "nlohmann/json.hpp"

namespace chimera::client {
namespace {

struct TraceOptions {
  std::string job;
  int step = -1;
  std::string out;
  std::string format;
  double wait_seconds = absl::ToDoubleSeconds(kDefaultTraceWait);
};

}  // namespace

void AddTraceCommand(
    CLI::App& app, std::function<std::unique_ptr<CoordinatorClient>()> connect,
    std::function<bool()> json) {
  auto options = std::make_shared<TraceOptions>();
  CLI::App* command = app.add_subcommand(
      "trace",
      "Record one step of a running job on every rank and write it as a "
      "Chrome trace (chrome://tracing, ui.perfetto.dev: one track per rank) "
      "or, for --out FILE.svg, as an SVG of the measured timeline above the "
      "simulator's timeline of the same plan. Waits for the ranks to finish "
      "that step (the next one without --step).");
  command->add_option("job", options->job, kJobReferenceHelp)->required();
  command
      ->add_option(
          "--step", options->step,
          "Step to record (from 0; default: the next step the job runs)")
      ->check(kNonNegativeNumber);
  command->add_option("--out", options->out, "File to write")->required();
  command
      ->add_option(
          "--format", options->format,
          "chrome or svg (default: svg for a FILE ending in .svg, else chrome)")
      ->check(CLI::IsMember({kChromeTraceFormat, kSvgTraceFormat}));
  command
      ->add_option("--wait", options->wait_seconds,
                   absl::StrCat("Seconds to wait for the step (default ",
                                options->wait_seconds, ")"))
      ->check(kPositiveNumber);
  command->callback([command, options, connect, json] {
    if (absl::Status writable = CheckTracePath(options->out); !writable.ok()) {
      ExitWithError(absl::InvalidArgumentError(
          absl::StrCat("--out: ", writable.message())));
    }
    const std::string format =
        options->format.empty() ? TraceFormatOf(options->out) : options->format;
    const std::optional<int> step = command->count("--step") > 0
                                        ? std::optional<int>(options->step)
                                        : std::nullopt;
    const std::unique_ptr<CoordinatorClient> client = connect();
    const chimera::v1::JobTrace trace = ValueOrExit(
        client->Trace(ValueOrExit(ResolveJobId(*client, options->job)), step,
                      absl::Seconds(options->wait_seconds)));
    if (absl::Status written = WriteTraceFile(trace, options->out, format);
        !written.ok()) {
      ExitWithError(absl::Status(written.code(),
                                 absl::StrCat("--out: ", written.message())));
    }
    if (json()) {
      std::cout << nlohmann::json({{"jobId", trace.job_id()},
                                   {"step", trace.step()},
                                   {"ranks", trace.ranks_size()},
                                   {"format", format},
                                   {"out", options->out}})
                       .dump()
                << "\n";
    } else {
      std::cout << "wrote the " << format << " trace of job " << trace.job_id()
                << " step " << trace.step() << " (" << trace.ranks_size()
                << " ranks) to " << options->out << "\n";
    }
  });
}

}  // namespace chimera::client
