// `chimera help [COMMAND]`: a command's full help, as `chimera COMMAND --help`
// prints it; and `chimera completion bash|zsh`: a completion script made from
// the command tree itself, so that it never lags behind the commands and
// flags.
//
//   source <(chimera completion bash)      # in ~/.bashrc
//   source <(chimera completion zsh)       # in ~/.zshrc, after compinit
//
// Add them after every other command: they read the tree as it stands.
#ifndef CHIMERA_CLIENT_HELP_COMMANDS_H_
#define CHIMERA_CLIENT_HELP_COMMANDS_H_

#include <CLI/CLI.hpp>
#include <string>

namespace chimera::client {

void AddHelpCommands(CLI::App& app);

// The bash completion script of `app`'s commands and flags; zsh runs it
// through bashcompinit.
std::string BashCompletion(const CLI::App& app);
std::string ZshCompletion(const CLI::App& app);

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_HELP_COMMANDS_H_
