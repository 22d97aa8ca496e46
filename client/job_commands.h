// The CLI's commands that talk to a coordinator: submit, status, logs, stop,
// list, describe, workers, trace and health. The connection flags
// (--address, --token, --tls-ca, --timeout) are global: they may stand
// before or after the command.
#ifndef CHIMERA_CLIENT_JOB_COMMANDS_H_
#define CHIMERA_CLIENT_JOB_COMMANDS_H_

#include <CLI/CLI.hpp>

namespace chimera::client {

void AddJobCommands(CLI::App& app);

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_JOB_COMMANDS_H_
