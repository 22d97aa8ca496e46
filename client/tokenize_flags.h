// The flags of `chimera tokenize`, declared once for both programs that
// read them: chimera, which checks them, completes them and prints their
// help, and chimera-tokenize, which it runs with them
// (client/tokenize_command.h says why there are two).
#ifndef CHIMERA_CLIENT_TOKENIZE_FLAGS_H_
#define CHIMERA_CLIENT_TOKENIZE_FLAGS_H_

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "client/tokenizer.h"

namespace chimera::client {

// What the command does, for both programs' --help.
extern const char kTokenizeDescription[];

// Declares the flags on `command`; parsing sets `options`, which must
// outlive it.
void AddTokenizeFlags(CLI::App& command, TokenizeOptions& options);

// The arguments that parse back into `options`.
std::vector<std::string> TokenizeArguments(const TokenizeOptions& options);

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_TOKENIZE_FLAGS_H_
