// chimera-worker export: a job's checkpoint as the weights the ecosystem
// reads (safetensors under Hugging Face's names, and its config.json; a
// torchscript model's under the names PyTorch gives its pieces).
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/byte_size.h"
#include "common/directory.h"
#include "common/safetensors.h"
#include "common/status_macros.h"
#include "jobspec/job_file.h"
#include "worker/cli/commands.h"
#include "worker/cli/exit_codes.h"
#include "worker/runtime/checkpoint.h"
#include "worker/runtime/task_spec.h"
#include "worker/weights/hugging_face_layout.h"
#include "worker/weights/safetensors_file.h"

namespace chimera::worker::cli {
namespace {

struct ExportFlags {
  std::string job_path;
  std::string checkpoint;
  std::string out;
  std::string format = "safetensors";
  int64_t step = 0;  // 0: the latest complete one
};

// A failure and the exit code it means.
struct ExportError {
  int exit_code;
  std::string message;
};

// The checkpoint directory `path` (the job's own: checkpointDir/<job>)
// and the step to export from it.
absl::StatusOr<std::pair<CheckpointDir, int64_t>> OpenCheckpoint(
    const std::string& path, int64_t step, int64_t num_layers) {
  const std::filesystem::path absolute = std::filesystem::absolute(path);
  ASSIGN_OR_RETURN(const Directory root,
                   Directory::OpenRoot(absolute.parent_path().string()));
  ASSIGN_OR_RETURN(CheckpointDir checkpoints,
                   CheckpointDir::Open(root, absolute.filename().string(),
                                       /*attempt=*/0, /*create=*/false));
  if (step == 0) {
    const std::optional<int64_t> latest =
        checkpoints.LatestComplete(num_layers);
    if (!latest) {
      return absl::NotFoundError("it holds no complete checkpoint");
    }
    step = *latest;
  }
  return std::make_pair(std::move(checkpoints), step);
}

// What a model's checkpoint is exported as: its tensors, under Hugging
// Face's names with their config.json, or for a torchscript model under its
// own (the checkpoint's) names with no config (the pieces are its config).
struct ExportedModel {
  NamedTensors tensors;
  std::optional<std::string> config;
};

absl::StatusOr<ExportedModel> ExportedAs(const ModelConfig& model,
                                         NamedTensors parameters) {
  if (model.family == ModelFamily::kTorchscript) {
    return ExportedModel{std::move(parameters), std::nullopt};
  }
  ASSIGN_OR_RETURN(std::string config, HuggingFaceConfig(model));
  ASSIGN_OR_RETURN(NamedTensors tensors, ToHuggingFace(model, parameters));
  return ExportedModel{std::move(tensors), std::move(config)};
}

// DIR/model.safetensors and DIR/config.json where there is one, DIR created
// when missing.
absl::Status WriteModel(const std::string& dir, const ExportedModel& model,
                        int64_t step) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create --out ", dir, ": ", error.message()));
  }
  RETURN_IF_ERROR(WriteSafetensorsFile(
      dir + "/" + kSafetensorsModelFile, model.tensors,
      {{"format", "pt"}, {"chimera.step", absl::StrCat(step)}}));
  if (!model.config) return absl::OkStatus();
  ASSIGN_OR_RETURN(const Directory out, Directory::OpenRoot(dir));
  return out.WriteFileDurably("config.json", *model.config);
}

std::optional<ExportError> Export(const ExportFlags& flags) {
  const auto bad = [](absl::string_view message) {
    return ExportError{kExitBadInput, std::string(message)};
  };
  if (flags.format != "safetensors") {
    return bad(absl::StrCat("--format ", flags.format,
                            ": the one format is safetensors"));
  }
  const auto job = jobspec::LoadJobFile(flags.job_path, jobspec::SpecOnly());
  if (!job.ok()) return bad(job.status().message());
  const ModelConfig model = ModelConfigFor(job->spec().model());
  // Refused before the checkpoint is read: a family with no layout.
  if (const absl::StatusOr<ExportedModel> layout = ExportedAs(model, {});
      !layout.ok()) {
    return bad(layout.status().message());
  }
  const auto checkpoint =
      OpenCheckpoint(flags.checkpoint, flags.step, model.num_layers);
  if (!checkpoint.ok()) {
    return bad(absl::StrCat("--checkpoint ", flags.checkpoint, ": ",
                            checkpoint.status().message()));
  }
  const auto& [checkpoints, step] = *checkpoint;
  const auto parameters = checkpoints.Parameters(step, model.num_layers);
  if (!parameters.ok()) return bad(parameters.status().message());
  const auto exported = ExportedAs(model, *parameters);
  if (!exported.ok()) return bad(exported.status().message());

  if (const absl::Status written = WriteModel(flags.out, *exported, step);
      !written.ok()) {
    return ExportError{kExitFailed, std::string(written.message())};
  }
  uint64_t bytes = 0;
  for (const auto& [name, tensor] : exported->tensors) bytes += tensor.nbytes();
  std::cout << "exported step " << step << " of " << flags.checkpoint << ": "
            << exported->tensors.size() << " tensors, " << FormatBytes(bytes)
            << ", to " << flags.out << "/" << kSafetensorsModelFile
            << (exported->config ? " and config.json" : "") << "\n";
  return std::nullopt;
}

}  // namespace

void AddExportCommand(CLI::App& app, Invocation* invocation) {
  auto flags = std::make_shared<ExportFlags>();
  CLI::App* command = app.add_subcommand(
      "export",
      "Write a job's checkpoint as model.safetensors and config.json under "
      "Hugging Face's names (LlamaForCausalLM for llama jobs, "
      "GPT2LMHeadModel for tied gpt jobs), or a torchscript job's "
      "model.safetensors under its pieces' names");
  command->add_option("--job", flags->job_path, "The job file that trained it")
      ->required();
  command
      ->add_option("--checkpoint", flags->checkpoint,
                   "The job's checkpoint directory (checkpointDir/<job>)")
      ->required();
  command->add_option("--out", flags->out, "Directory to write (created)")
      ->required();
  command
      ->add_option("--step", flags->step,
                   "Checkpoint step to export; default the latest complete")
      ->check(CLI::PositiveNumber);
  command->add_option("--format", flags->format, "safetensors (the default)");
  command->callback([flags, invocation] {
    const std::optional<ExportError> error = Export(*flags);
    if (error) std::cerr << "chimera-worker export: " << error->message << "\n";
    invocation->exit_code = error ? error->exit_code : kExitOk;
  });
}

}  // namespace chimera::worker::cli
