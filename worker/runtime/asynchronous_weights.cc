#include "worker/runtime/asynchronous_weights.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace chimera::worker {

AsynchronousWeights::AsynchronousWeights(
    schedule::UpdateRule rule,
    const std::map<int, std::vector<at::Tensor>>& stages)
    : rule_(rule) {
  for (const auto& [model_stage, parameters] : stages) {
    stages_[model_stage].versions =
        std::make_unique<WeightVersions>(parameters);
  }
}

absl::Status AsynchronousWeights::Use(int model_stage, schedule::OpKind op,
                                      MicroBatchId id) {
  Stage& stage = stages_.at(model_stage);
  if (rule_ == schedule::UpdateRule::kDoubleBuffered) {
    return stage.versions->Use(stage.first_version +
                               std::max<int64_t>(0, id.step - 1));
  }
  if (op == schedule::OpKind::kForward) {
    stage.in_flight[id] = stage.versions->newest();
  }
  const auto it = stage.in_flight.find(id);
  if (it == stage.in_flight.end()) {
    return absl::InternalError(
        absl::StrCat("micro-batch ", id.micro_batch, " of step ", id.step,
                     " has no forward whose weights it could reuse"));
  }
  return stage.versions->Use(it->second);
}

void AsynchronousWeights::Done(int model_stage, schedule::OpKind op,
                               MicroBatchId id) {
  if (rule_ != schedule::UpdateRule::kStashed ||
      !schedule::ComputesWeightGradient(op)) {
    return;
  }
  stages_.at(model_stage).in_flight.erase(id);
}

void AsynchronousWeights::Update(int model_stage, Optimizer& optimizer) {
  Stage& stage = stages_.at(model_stage);
  WeightVersions& versions = *stage.versions;
  if (rule_ == schedule::UpdateRule::kDoubleBuffered) {
    // The version before the newest: its step's micro-batches are done.
    versions.DropBelow(versions.newest());
    versions.Update(optimizer);
    return;
  }
  // The versions micro-batches in flight run on stay; of the others, the
  // newest's buffers take the next version, or a dropped one's.
  int64_t oldest_needed = versions.newest();
  bool newest_needed = false;
  for (const auto& [id, version] : stage.in_flight) {
    oldest_needed = std::min(oldest_needed, version);
    newest_needed |= version == versions.newest();
  }
  versions.DropBelow(oldest_needed);
  if (newest_needed) {
    versions.Update(optimizer);
  } else {
    versions.UpdateInPlace(optimizer);
  }
}

int64_t AsynchronousWeights::ExtraVersionBytes() const {
  int64_t bytes = 0;
  for (const auto& [model_stage, stage] : stages_) {
    bytes +=
        (stage.versions->most_kept() - 1) * stage.versions->version_bytes();
  }
  return bytes;
}

void AsynchronousWeights::ResetPeaks() {
  for (auto& [model_stage, stage] : stages_) stage.versions->ResetPeak();
}

absl::Status AsynchronousWeights::Restart() {
  for (auto& [model_stage, stage] : stages_) {
    if (!stage.in_flight.empty()) {
      return absl::InternalError(absl::StrCat(
          "model stage ", model_stage, " restarts its weight versions with ",
          stage.in_flight.size(), " micro-batch(es) still in flight"));
    }
    stage.first_version = stage.versions->newest();
    stage.versions->DropBelow(stage.first_version);
    RETURN_IF_ERROR(stage.versions->Use(stage.first_version));
  }
  return absl::OkStatus();
}

}  // namespace chimera::worker
