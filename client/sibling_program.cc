#include "client/sibling_program.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "client/exit_codes.h"

namespace chimera::client {

void RunSiblingProgram(const std::string& program,
                       const std::vector<std::string>& arguments,
                       const std::string& command) {
  const std::string binary =
      (std::filesystem::read_symlink("/proc/self/exe").parent_path() / program)
          .string();
  std::vector<std::string> line = {program};
  line.insert(line.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (std::string& argument : line) argv.push_back(argument.data());
  argv.push_back(nullptr);
  ::execv(binary.c_str(), argv.data());
  std::cerr << "chimera " << command << ": cannot run " << binary << ": "
            << std::strerror(errno) << " (it is built and installed beside "
            << "chimera)\n";
  throw CLI::RuntimeError(kExitFailure);
}

}  // namespace chimera::client
