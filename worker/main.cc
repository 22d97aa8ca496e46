// chimera-worker: runs pipeline stages with LibTorch. Its subcommands
// (worker/cli/commands.h):
//
//   chimera-worker daemon --coordinator 127.0.0.1:50051 --worker-id host-0
//       [--gpu 1] [--data-root /data --checkpoint-root /checkpoints]
//   chimera-worker standalone --job examples/chimera.yaml --rank 0 --world 4
//       --store 127.0.0.1:29500 [--steps 20] [--resume]   # one per rank
//   chimera-worker profile --job job.yaml [--out profile.json]
//   chimera-worker host-costs [--out host.json]
//   chimera-worker devices [-o json]
//   chimera-worker version [-o json]
//
// A job's data path and checkpoint directory are relative to --data-root and
// --checkpoint-root (default: the current directory), and may not leave them.
//
// Exit codes: 0 success, 1 the run failed, 2 bad flags or job (or a command
// line in the form before subcommands), 3 (daemon) another daemon registered
// under this one's --worker-id, which this one must not take back:
// restarting it would only evict the other.
#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

#include "worker/cli/commands.h"
#include "worker/cli/exit_codes.h"

int main(int argc, char** argv) {
  namespace cli = chimera::worker::cli;
  if (const std::string hint = cli::OldFormHint(argc, argv); !hint.empty()) {
    std::cerr << hint << "\n";
    return cli::kExitBadInput;
  }
  CLI::App app{"chimera-worker: executes pipeline stages with LibTorch"};
  app.require_subcommand(1);
  app.set_version_flag("--version", [] { return cli::VersionLine(/*json=*/false); });
  cli::Invocation invocation{argv, cli::kExitOk};
  cli::AddDaemonCommand(app, &invocation);
  cli::AddStandaloneCommand(app, &invocation);
  cli::AddProfileCommand(app, &invocation);
  cli::AddHostCostsCommand(app, &invocation);
  cli::AddExportCommand(app, &invocation);
  cli::AddDevicesCommand(app, &invocation);
  cli::AddVersionCommand(app, &invocation);
  cli::AddRunTaskCommand(app, &invocation);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help is exit 0; every bad flag or value is 2, whatever CLI11 numbers.
    return app.exit(e) == 0 ? cli::kExitOk : cli::kExitBadInput;
  }
  return invocation.exit_code;
}
