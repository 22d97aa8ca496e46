// Flags several of chimera-worker's subcommands take, written once.
#ifndef CHIMERA_WORKER_CLI_SHARED_FLAGS_H_
#define CHIMERA_WORKER_CLI_SHARED_FLAGS_H_

#include <CLI/CLI.hpp>
#include <string>

namespace chimera::worker::cli {

// --data-root and --checkpoint-root (empty: the current directory).
void AddRootFlags(CLI::App* command, std::string* data_root,
                  std::string* checkpoint_root);
// --data-root alone, for commands that write no checkpoint.
void AddDataRootFlag(CLI::App* command, std::string* data_root);
// --gpu: a CUDA device index, >= 0; `what` says which device it picks.
void AddGpuFlag(CLI::App* command, int* gpu, const std::string& what);
// -o/--output: text or json.
void AddOutputFlag(CLI::App* command, std::string* output);
// --out: the file a command writes (empty: stdout), added with `what` as its
// help; and writing `text` there, which returns the exit status (a failed
// write says so on stderr).
void AddOutFlag(CLI::App* command, std::string* out_path,
                const std::string& what);
int WriteOut(const std::string& text, const std::string& out_path);

}  // namespace chimera::worker::cli

#endif  // CHIMERA_WORKER_CLI_SHARED_FLAGS_H_
