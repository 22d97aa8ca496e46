#include "worker/model/stage_factory.h"

#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/model/scripted_stage.h"
#include "worker/model/transformer_stage.h"

namespace chimera::worker {
namespace {

// OK when the loaded pieces have the sizes the job declares (and planned
// with); INVALID_ARGUMENT naming the first that differs.
absl::Status CheckSizes(const ScriptedModules& model, const ModelConfig& config,
                        const Directory& modules) {
  const auto blocks = static_cast<int64_t>(model.blocks.size());
  for (const auto& [field, declared, found] :
       {std::tuple<absl::string_view, int64_t, int64_t>{
            "num_layers (its blocks)", config.num_layers, blocks},
        {"hidden_size (its hidden states' width)", config.hidden_size,
         model.hidden_size},
        {"vocab_size (its logits' width)", config.vocab_size,
         model.vocab_size}}) {
    if (declared != found) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the TorchScript model in '", modules.path(), "' has ", found,
          " for model.", field, "; the job declares ", declared));
    }
  }
  return absl::OkStatus();
}

}  // namespace

StageFactory::StageFactory(const ModelConfig& config, uint64_t seed,
                           c10::Device device,
                           std::optional<ScriptedModules> scripted)
    : config_(config),
      seed_(seed),
      device_(device),
      scripted_(std::move(scripted)) {}

StageFactory StageFactory::Transformer(const ModelConfig& config, uint64_t seed,
                                       c10::Device device) {
  return StageFactory(config, seed, device, std::nullopt);
}

absl::StatusOr<StageFactory> StageFactory::Scripted(const Directory& modules,
                                                    const ModelConfig& config,
                                                    c10::Device device) {
  ASSIGN_OR_RETURN(
      ScriptedModules model,
      LoadScriptedModules(
          modules, {.seq_length = config.seq_length, .dtype = config.dtype}));
  RETURN_IF_ERROR(CheckSizes(model, config, modules));
  return StageFactory(config, /*seed=*/0, device, std::move(model));
}

absl::StatusOr<std::shared_ptr<Stage>> StageFactory::Build(
    LayerRange layers) const {
  if (scripted_) return BuildScriptedStage(*scripted_, layers, device_);
  return BuildTransformerStage(config_, layers, seed_, device_);
}

}  // namespace chimera::worker
