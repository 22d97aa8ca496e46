#include "client/version_command.h"

#include <iostream>
#include <memory>
#include <string>

#include "common/build_info.h"

namespace chimera::client {

void AddVersionCommand(CLI::App& app) {
  app.set_version_flag(
      "--version", DescribeBuild("chimera"),
      "Print the version, commit, build type and LibTorch, and exit");
  CLI::App* command = app.add_subcommand(
      "version",
      "Print the version, commit, build type and LibTorch, and exit");
  auto output = std::make_shared<std::string>("text");
  command->add_option("-o,--output", *output, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  command->callback([output] {
    if (*output == "text") {
      std::cout << DescribeBuild("chimera") << "\n";
      return;
    }
    std::cout << DescribeBuildAsJson("chimera") << "\n";
  });
}

}  // namespace chimera::client
