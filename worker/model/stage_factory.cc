#include "worker/model/stage_factory.h"

#include <utility>

#include "common/status_macros.h"
#include "worker/model/scripted_stage.h"
#include "worker/model/transformer_stage.h"

namespace chimera::worker {

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
  ASSIGN_OR_RETURN(ScriptedModules model,
                   LoadScriptedModulesFor(modules, config));
  return StageFactory(config, /*seed=*/0, device, std::move(model));
}

absl::StatusOr<std::shared_ptr<Stage>> StageFactory::Build(
    LayerRange layers) const {
  if (scripted_) return BuildScriptedStage(*scripted_, layers, device_);
  return BuildTransformerStage(config_, layers, seed_, device_);
}

}  // namespace chimera::worker
