// `chimera validate -f FILE...`: parses and validates job files offline and
// reports every problem, one per line, naming the field.
#ifndef CHIMERA_CLIENT_VALIDATE_COMMAND_H_
#define CHIMERA_CLIENT_VALIDATE_COMMAND_H_

#include <CLI/CLI.hpp>

namespace chimera::client {

// Registers the subcommand on `app`. Exits with kExitUsage when any file is
// invalid.
void AddValidateCommand(CLI::App& app);

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_VALIDATE_COMMAND_H_
