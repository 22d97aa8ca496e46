#include "worker/daemon/step_reports.h"

#include <algorithm>
#include <utility>

namespace chimera::worker {

StepReports::StepReports(absl::Duration interval, size_t max_held,
                         int64_t checkpoint_every)
    : interval_(interval),
      max_held_(std::max<size_t>(1, max_held)),
      checkpoint_every_(checkpoint_every) {}

void StepReports::Add(chimera::v1::WorkerStepMetrics metrics) {
  held_.push_back(std::move(metrics));
}

bool StepReports::TakesACheckpointAfter(
    const chimera::v1::WorkerStepMetrics& metrics) const {
  // Step s (from 0) completes s + 1 steps, and every checkpoint_every
  // completed steps are a checkpoint.
  return checkpoint_every_ > 0 && (metrics.step() + 1) % checkpoint_every_ == 0;
}

bool StepReports::Due(absl::Time now) const {
  return TimeUntilDue(now) == absl::ZeroDuration();
}

absl::Duration StepReports::TimeUntilDue(absl::Time now) const {
  if (held_.empty()) return absl::InfiniteDuration();
  const auto checkpointed = [this](const auto& metrics) {
    return TakesACheckpointAfter(metrics);
  };
  if (held_.size() >= max_held_ ||
      std::any_of(held_.begin(), held_.end(), checkpointed) ||
      held_.back().checkpoint_step() > sent_checkpoint_) {
    return absl::ZeroDuration();
  }
  return std::max(absl::ZeroDuration(), last_sent_ + interval_ - now);
}

std::vector<chimera::v1::WorkerStepMetrics> StepReports::Take(absl::Time now) {
  if (held_.empty()) return {};
  sent_checkpoint_ = std::max(sent_checkpoint_, held_.back().checkpoint_step());
  last_sent_ = now;
  return std::exchange(held_, {});
}

}  // namespace chimera::worker
