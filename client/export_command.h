// `chimera export`: a job's checkpoint as model.safetensors and config.json
// under Hugging Face's names. Reading checkpoints takes LibTorch, which only
// the worker links, so it checks its flags and runs `chimera-worker export`
// (the program beside chimera) with them.
#ifndef CHIMERA_CLIENT_EXPORT_COMMAND_H_
#define CHIMERA_CLIENT_EXPORT_COMMAND_H_

#include <CLI/CLI.hpp>

namespace chimera::client {

// Registers the subcommand on `app`.
void AddExportCommand(CLI::App& app);

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_EXPORT_COMMAND_H_
