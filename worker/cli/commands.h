// chimera-worker's subcommands. Each Add*Command registers one on `app`
// with its own flags and --help; when the command line names it, its
// callback runs it and leaves the process's exit status (exit_codes.h) in
// the Invocation.
//
//   daemon      serve a coordinator (worker/daemon/worker_daemon.h)
//   standalone  run one rank of a job file without a coordinator
//               (worker/standalone/standalone.h)
//   profile     measure a job's per-layer costs for the planner
//               (worker/profile/profiler.h)
//   host-costs  measure what a CPU worker pays on this host beyond its
//               compute (worker/profile/host_costs.h)
//   export      a job's checkpoint as safetensors under Hugging Face's names
//   devices     what this machine offers
//   version     the build and the LibTorch it runs on
//   run-task    internal: one task, in the process its daemon started
#ifndef CHIMERA_WORKER_CLI_COMMANDS_H_
#define CHIMERA_WORKER_CLI_COMMANDS_H_

#include <CLI/CLI.hpp>
#include <string>

namespace chimera::worker::cli {

struct Invocation {
  // The process's command line: the commands that compute restart the
  // process with it (RestartWithEnvironment).
  char** argv = nullptr;
  int exit_code = 0;
};

void AddDaemonCommand(CLI::App& app, Invocation* invocation);
void AddStandaloneCommand(CLI::App& app, Invocation* invocation);
void AddProfileCommand(CLI::App& app, Invocation* invocation);
void AddHostCostsCommand(CLI::App& app, Invocation* invocation);
void AddExportCommand(CLI::App& app, Invocation* invocation);
void AddDevicesCommand(CLI::App& app, Invocation* invocation);
void AddVersionCommand(CLI::App& app, Invocation* invocation);
void AddRunTaskCommand(CLI::App& app, Invocation* invocation);

// What `version` prints, without its newline: text, or (`json`) one JSON
// object.
std::string VersionLine(bool json);

// The one-line hint for a command line in the form before subcommands
// (`--standalone ...`, `--coordinator HOST:PORT ...`, `--profile`,
// `--devices`, `--run-task`), naming the subcommand that replaced it; empty
// when `argv` is not such a line.
std::string OldFormHint(int argc, char** argv);

}  // namespace chimera::worker::cli

#endif  // CHIMERA_WORKER_CLI_COMMANDS_H_
