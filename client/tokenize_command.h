// `chimera tokenize`: checks its flags, then runs chimera-tokenize
// (client/tokenize_main.cc), the program beside chimera, with them. A
// program of its own because Debian's SentencePiece carries a copy of an
// older protobuf that aborts any process which also loads the protobuf
// chimera's gRPC client is built on.
#ifndef CHIMERA_CLIENT_TOKENIZE_COMMAND_H_
#define CHIMERA_CLIENT_TOKENIZE_COMMAND_H_

#include <CLI/CLI.hpp>

namespace chimera::client {

// Registers the subcommand on `app`.
void AddTokenizeCommand(CLI::App& app);

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_TOKENIZE_COMMAND_H_
