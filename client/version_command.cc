#include "client/version_command.h"

#include <iostream>
#include <memory>
#include <string>

#include "common/build_info.h"
#include "nlohmann/json.hpp"

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
    const BuildInfo& build = GetBuildInfo();
    // Field names as the job file writes its own: lowerCamelCase.
    const nlohmann::json json = {{"version", build.version},
                                 {"gitCommit", build.git_commit},
                                 {"buildType", build.build_type},
                                 {"libtorchVersion", build.torch_version}};
    std::cout << json.dump(2) << "\n";
  });
}

}  // namespace chimera::client
