#include "worker/cli/shared_flags.h"

#include <fstream>
#include <iostream>

#include "common/number_checks.h"
#include "worker/cli/exit_codes.h"

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

void AddOutFlag(CLI::App* command, std::string* out_path,
                const std::string& what) {
  command->add_option("--out", *out_path, what + "; default stdout");
}

int WriteOut(const std::string& text, const std::string& out_path) {
  if (out_path.empty()) {
    std::cout << text;
    return kExitOk;
  }
  std::ofstream out(out_path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) {
    std::cerr << "chimera-worker: cannot write --out " << out_path << "\n";
    return kExitFailed;
  }
  return kExitOk;
}

}  // namespace chimera::worker::cli
