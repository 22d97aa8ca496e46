#include "worker/cli/shared_flags.h"

#include "common/number_checks.h"

namespace chimera::worker::cli {

void AddDataRootFlag(CLI::App* command, std::string* data_root) {
  command->add_option("--data-root", *data_root,
                      "The directory job data paths are relative to; a job "
                      "reads nothing outside it (default: the current "
                      "directory)");
}

void AddRootFlags(CLI::App* command, std::string* data_root,
                  std::string* checkpoint_root) {
  AddDataRootFlag(command, data_root);
  command->add_option("--checkpoint-root", *checkpoint_root,
                      "The directory job checkpoint directories are relative "
                      "to; a job writes nothing outside it (default: the "
                      "current directory)");
}

void AddGpuFlag(CLI::App* command, int* gpu, const std::string& what) {
  command->add_option("--gpu", *gpu, what)->check(kNonNegativeNumber);
}

void AddOutputFlag(CLI::App* command, std::string* output) {
  command->add_option("-o,--output", *output, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
}

}  // namespace chimera::worker::cli
