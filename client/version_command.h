// `chimera --version` and `chimera version [-o json]`: the release, source
// commit, build type and LibTorch version of this build (common/build_info.h).
#ifndef CHIMERA_CLIENT_VERSION_COMMAND_H_
#define CHIMERA_CLIENT_VERSION_COMMAND_H_

#include <CLI/CLI.hpp>

namespace chimera::client {

void AddVersionCommand(CLI::App& app);

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_VERSION_COMMAND_H_
