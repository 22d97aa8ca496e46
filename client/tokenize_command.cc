#include "client/tokenize_command.h"

#include <memory>

#include "client/sibling_program.h"
#include "client/tokenize_flags.h"

namespace chimera::client {

void AddTokenizeCommand(CLI::App& app) {
  auto options = std::make_shared<TokenizeOptions>();
  CLI::App* command = app.add_subcommand("tokenize", kTokenizeDescription);
  AddTokenizeFlags(*command, *options);
  command->callback([options] {
    RunSiblingProgram("chimera-tokenize", TokenizeArguments(*options),
                      "tokenize");
  });
}

}  // namespace chimera::client
