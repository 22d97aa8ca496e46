#include "client/export_command.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/sibling_program.h"

namespace chimera::client {
namespace {

struct ExportOptions {
  std::string job;
  std::string checkpoint;
  std::string out;
  std::string format;
  int64_t step = 0;
};

}  // namespace

void AddExportCommand(CLI::App& app) {
  auto options = std::make_shared<ExportOptions>();
  CLI::App* command = app.add_subcommand(
      "export",
      "Write a job's checkpoint as model.safetensors and config.json under "
      "Hugging Face's names (LlamaForCausalLM for llama jobs, "
      "GPT2LMHeadModel for tied gpt jobs), or a torchscript job's "
      "model.safetensors under its pieces' names");
  command->add_option("--job", options->job, "The job file that trained it")
      ->required();
  command
      ->add_option("--checkpoint", options->checkpoint,
                   "The job's checkpoint directory (checkpointDir/<job id>)")
      ->required();
  command->add_option("--out", options->out, "Directory to write (created)")
      ->required();
  command
      ->add_option("--step", options->step,
                   "Checkpoint step to export; default the latest complete")
      ->check(CLI::PositiveNumber);
  command->add_option("--format", options->format, "safetensors (the default)");
  command->callback([options] {
    std::vector<std::string> arguments = {"export",
                                          "--job",
                                          options->job,
                                          "--checkpoint",
                                          options->checkpoint,
                                          "--out",
                                          options->out};
    if (options->step > 0) {
      arguments.insert(arguments.end(),
                       {"--step", absl::StrCat(options->step)});
    }
    if (!options->format.empty()) {
      arguments.insert(arguments.end(), {"--format", options->format});
    }
    RunSiblingProgram("chimera-worker", arguments, "export");
  });
}

}  // namespace chimera::client
