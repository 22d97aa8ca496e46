// Builds the stages of one task's model, whatever defines it: one of our own
// transformer families, initialised from the job's seed (transformer_stage.h),
// or a user's TorchScript pieces (scripted_stage.h), loaded and checked once
// and then divided among the stages the task holds.
//
//   ASSIGN_OR_RETURN(StageFactory stages,
//                    StageFactory::Scripted(modules, config, device));
//   ASSIGN_OR_RETURN(std::shared_ptr<Stage> first, stages.Build({0, 2}));
#ifndef CHIMERA_WORKER_MODEL_STAGE_FACTORY_H_
#define CHIMERA_WORKER_MODEL_STAGE_FACTORY_H_

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "common/directory.h"
#include "worker/model/model_config.h"
#include "worker/model/scripted_modules.h"
#include "worker/model/stage.h"

namespace chimera::worker {

class StageFactory {
 public:
  // The stages of `config`'s model (any family but torchscript), each
  // parameter initialised from `seed`.
  static StageFactory Transformer(const ModelConfig& config, uint64_t seed,
                                  c10::Device device);
  // The stages of the TorchScript model in `modules`, whose pieces must have
  // `config`'s sizes. Errors as LoadScriptedModulesFor, naming the file or
  // the size.
  static absl::StatusOr<StageFactory> Scripted(const Directory& modules,
                                               const ModelConfig& config,
                                               c10::Device device);

  // The stage of blocks `layers`. Scripted stages share the loaded pieces,
  // so each range is built once and ranges must not overlap.
  // INVALID_ARGUMENT when the range does not lie within the model.
  absl::StatusOr<std::shared_ptr<Stage>> Build(LayerRange layers) const;

 private:
  StageFactory(const ModelConfig& config, uint64_t seed, c10::Device device,
               std::optional<ScriptedModules> scripted);

  ModelConfig config_;
  uint64_t seed_;
  c10::Device device_;
  std::optional<ScriptedModules> scripted_;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_MODEL_STAGE_FACTORY_H_
