#include "client/tokenize_command.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "client/exit_codes.h"
#include "client/tokenize_flags.h"

namespace chimera::client {

void AddTokenizeCommand(CLI::App& app) {
  auto options = std::make_shared<TokenizeOptions>();
  CLI::App* command = app.add_subcommand("tokenize", kTokenizeDescription);
  AddTokenizeFlags(*command, *options);
  command->callback([options] {
    const std::string binary =
        (std::filesystem::read_symlink("/proc/self/exe").parent_path() /
         "chimera-tokenize")
            .string();
    std::vector<std::string> arguments = {"chimera-tokenize"};
    for (std::string& argument : TokenizeArguments(*options)) {
      arguments.push_back(std::move(argument));
    }
    std::vector<char*> argv;
    for (std::string& argument : arguments) argv.push_back(argument.data());
    argv.push_back(nullptr);
    ::execv(binary.c_str(), argv.data());
    std::cerr << "chimera tokenize: cannot run " << binary << ": "
              << std::strerror(errno)
              << " (it is built and installed beside chimera)\n";
    throw CLI::RuntimeError(kExitFailure);
  });
}

}  // namespace chimera::client
