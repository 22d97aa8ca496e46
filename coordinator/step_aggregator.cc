#include "coordinator/step_aggregator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "coordinator/recovery_history.h"
#include "schedule/simulator.h"

namespace chimera::coordinator {

std::optional<CompletedStep> StepAggregator::Add(
    int rank, const chimera::v1::WorkerStepMetrics& metrics) {
  const int step = metrics.step();
  auto& reports = pending_[step];
  reports[rank] = metrics;
  if (static_cast<int>(reports.size()) < ranks_) return std::nullopt;
  CompletedStep done{step, std::move(reports)};
  pending_.erase(pending_.begin(), pending_.upper_bound(step));
  return done;
}

chimera::v1::StepSummary Summarize(const CompletedStep& step,
                                   const chimera::v1::TrainJob& manifest) {
  chimera::v1::StepSummary summary;
  summary.set_step(step.step);
  double bubble = 0;
  for (const auto& [rank, metrics] : step.ranks) {
    // Each last-stage rank reports its micro-batches' share of the mean.
    summary.set_loss(summary.loss() + metrics.loss());
    summary.set_step_seconds(
        std::max(summary.step_seconds(), metrics.step_seconds()));
    summary.set_peak_memory_bytes(
        std::max(summary.peak_memory_bytes(), metrics.peak_memory_bytes()));
    bubble += schedule::BubbleRatio(metrics.bubble_seconds(), metrics.step_seconds());
  }
  summary.set_bubble_ratio(bubble / std::max<size_t>(1, step.ranks.size()));
  if (summary.step_seconds() > 0) {
    const double samples = manifest.spec().training().global_batch_size();
    summary.set_samples_per_second(samples / summary.step_seconds());
    summary.set_tokens_per_second(samples *
                                  manifest.spec().model().seq_length() /
                                  summary.step_seconds());
  }
  return summary;
}

namespace {

// `job`'s per-worker view from every rank's report of one step.
void SetWorkerSummaries(const CompletedStep& step,
                        const std::vector<std::string>& worker_of_rank,
                        chimera::v1::Job* job) {
  job->clear_workers();
  for (const auto& [rank, metrics] : step.ranks) {
    chimera::v1::WorkerSummary* worker = job->add_workers();
    worker->set_rank(rank);
    worker->set_worker_id(worker_of_rank[rank]);
    worker->set_bubble_ratio(
        schedule::BubbleRatio(metrics.bubble_seconds(), metrics.step_seconds()));
    worker->set_peak_memory_bytes(metrics.peak_memory_bytes());
    worker->set_weights_bytes(metrics.weights_bytes());
    worker->set_gradients_bytes(metrics.gradients_bytes());
    worker->set_optimizer_bytes(metrics.optimizer_bytes());
    worker->set_activations_bytes(metrics.activations_bytes());
    worker->set_busy_seconds(metrics.busy_seconds());
  }
}

}  // namespace

void RecordStep(const CompletedStep& step,
                const std::vector<std::string>& worker_of_rank, absl::Time now,
                chimera::v1::Job* job) {
  chimera::v1::StepSummary summary = Summarize(step, job->manifest());
  summary.set_end_time(absl::ToDoubleSeconds(now - absl::UnixEpoch()));
  chimera::v1::JobStatus& status = *job->mutable_status();
  *status.mutable_last_step() = std::move(summary);
  status.set_completed_steps(step.step + 1);
  // A checkpoint is complete once every rank has written its share: each
  // reports the latest it has written (ranks write in the background, in
  // step order), so the least of those is complete.
  const auto least = std::min_element(
      step.ranks.begin(), step.ranks.end(), [](const auto& a, const auto& b) {
        return a.second.checkpoint_step() < b.second.checkpoint_step();
      });
  if (least != step.ranks.end() &&
      least->second.checkpoint_step() > status.checkpoint_step()) {
    status.set_checkpoint_step(least->second.checkpoint_step());
  }
  SetWorkerSummaries(step, worker_of_rank, job);
  RecoveryTrained(now, job);
}

absl::StatusOr<bool> RecordFirstStep(int first_step, chimera::v1::Job* job) {
  const int max_steps = job->manifest().spec().training().max_steps();
  if (first_step < 0 || first_step > max_steps) {
    return absl::InvalidArgumentError(
        absl::StrCat("first_step: ", first_step,
                     " is outside the job's steps [0, ", max_steps, "]"));
  }
  chimera::v1::JobStatus& status = *job->mutable_status();
  if (status.completed_steps() == first_step &&
      status.checkpoint_step() == first_step) {
    return false;
  }
  status.set_completed_steps(first_step);
  status.set_checkpoint_step(first_step);
  RecoveryResumedAt(first_step, job);
  return true;
}

}  // namespace chimera::coordinator
