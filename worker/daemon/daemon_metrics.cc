#include "worker/daemon/daemon_metrics.h"

#include <utility>

#include "common/version.h"
#include "net/metric_families.h"
#include "schedule/simulator.h"

namespace chimera::worker {

using prometheus::MetricType;

DaemonMetrics::DaemonMetrics(std::string worker_id, std::string node)
    : worker_id_(std::move(worker_id)),
      node_(std::move(node)),
      tasks_by_outcome_({{"succeeded", 0}, {"failed", 0}, {"stopped", 0}}) {}

void DaemonMetrics::SetRegistered(bool registered) {
  absl::MutexLock lock(&mutex_);
  registered_ = registered;
}

void DaemonMetrics::HeartbeatFailed() {
  absl::MutexLock lock(&mutex_);
  ++heartbeat_failures_;
}

void DaemonMetrics::TaskStarted(const std::string& job_id, int rank) {
  absl::MutexLock lock(&mutex_);
  task_ = RunningTask{job_id, rank, std::nullopt};
}

void DaemonMetrics::StepDone(const chimera::v1::WorkerStepMetrics& step) {
  absl::MutexLock lock(&mutex_);
  ++steps_;
  if (task_) task_->last_step = step;
}

void DaemonMetrics::TaskEnded(const std::string& outcome) {
  absl::MutexLock lock(&mutex_);
  ++tasks_by_outcome_[outcome];
  task_.reset();
}

std::vector<prometheus::MetricFamily> DaemonMetrics::Collect() const {
  absl::MutexLock lock(&mutex_);
  std::vector<prometheus::MetricFamily> families;
  auto add = [&families](const char* name, const char* help, MetricType type,
                         std::vector<prometheus::ClientMetric::Label> labels,
                         double value) {
    families.push_back(net::MetricFamily(name, help, type));
    net::AddSample(families.back(), std::move(labels), value);
  };
  add("chimera_worker_info", "This worker's name, node and version (always 1)",
      MetricType::Gauge,
      {{"worker", worker_id_}, {"node", node_}, {"version", kVersion}}, 1);
  add("chimera_worker_registered", "1 while registered with the coordinator",
      MetricType::Gauge, {}, registered_ ? 1 : 0);
  add("chimera_worker_steps_total", "Training steps this worker completed",
      MetricType::Counter, {}, steps_);
  add("chimera_worker_heartbeat_failures_total",
      "Heartbeats the coordinator did not take", MetricType::Counter, {},
      heartbeat_failures_);
  families.push_back(net::MetricFamily("chimera_worker_tasks_total",
                                  "Tasks ended, by outcome",
                                  MetricType::Counter));
  for (const auto& [outcome, count] : tasks_by_outcome_) {
    net::AddSample(families.back(), {{"outcome", outcome}}, count);
  }
  if (!task_) return families;

  const std::vector<prometheus::ClientMetric::Label> task = {
      {"job", task_->job_id}, {"rank", std::to_string(task_->rank)}};
  add("chimera_worker_task", "The task this worker runs (1 while it runs)",
      MetricType::Gauge, task, 1);
  if (!task_->last_step) return families;
  const chimera::v1::WorkerStepMetrics& step = *task_->last_step;
  const double seconds = step.step_seconds();
  auto per_second = [seconds](double amount) {
    return seconds > 0 ? amount / seconds : 0;
  };
  add("chimera_worker_step", "Last step completed", MetricType::Gauge, task,
      step.step());
  add("chimera_worker_loss",
      "Loss of the last step (last stages only; 0 elsewhere)",
      MetricType::Gauge, task, step.loss());
  add("chimera_worker_step_seconds", "Wall time of the last step",
      MetricType::Gauge, task, seconds);
  add("chimera_worker_bubble_ratio", "Idle share of the last step",
      MetricType::Gauge, task,
      schedule::BubbleRatio(step.bubble_seconds(), seconds));
  add("chimera_worker_samples_per_second",
      "Samples this worker's pipeline trained per second", MetricType::Gauge,
      task, per_second(step.samples()));
  add("chimera_worker_tokens_per_second",
      "Tokens this worker's pipeline trained per second", MetricType::Gauge,
      task, per_second(step.tokens()));
  add("chimera_worker_recv_wait_seconds",
      "Time blocked on receives in the last step", MetricType::Gauge, task,
      step.recv_wait_seconds());
  add("chimera_worker_exposed_allreduce_seconds",
      "Gradient allreduce time not hidden behind compute in the last step",
      MetricType::Gauge, task, step.exposed_allreduce_seconds());
  families.push_back(net::MetricFamily("chimera_worker_memory_bytes",
                                  "Memory at the last step's peak by what "
                                  "holds it (weights, gradients, optimizer, "
                                  "activations = the rest) and the peak itself",
                                  MetricType::Gauge));
  for (const auto& [kind, bytes] : std::vector<std::pair<const char*, int64_t>>{
           {"weights", step.weights_bytes()},
           {"gradients", step.gradients_bytes()},
           {"optimizer", step.optimizer_bytes()},
           {"activations", step.activations_bytes()},
           {"peak", step.peak_memory_bytes()}}) {
    std::vector<prometheus::ClientMetric::Label> labels = task;
    labels.push_back({"kind", kind});
    net::AddSample(families.back(), std::move(labels), static_cast<double>(bytes));
  }
  return families;
}

}  // namespace chimera::worker
