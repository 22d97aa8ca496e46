#include "worker/daemon/daemon_metrics.h"

#include <utility>

#include "common/version.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"
#include "net/metric_families.h"
#include "schedule/simulator.h"

namespace chimera::worker {
namespace {

using Labels = std::vector<prometheus::ClientMetric::Label>;
using prometheus::MetricType;

// Step durations from a fast CPU step to a slow multi-node one, in seconds.
const prometheus::Histogram::BucketBoundaries& StepDurationBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60, 120};
  return *buckets;
}

// Adds `from`'s seconds to `to`'s, kind by kind.
void AddSecondsByOp(const chimera::v1::SecondsByOp& from,
                    chimera::v1::SecondsByOp& to) {
  const google::protobuf::Reflection* reflection = to.GetReflection();
  const google::protobuf::Descriptor* descriptor = to.GetDescriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = descriptor->field(i);
    reflection->SetDouble(
        &to, field,
        reflection->GetDouble(to, field) + reflection->GetDouble(from, field));
  }
}

// Appends a family of one sample.
void AddFamily(std::vector<prometheus::MetricFamily>& families,
               const char* name, const char* help, MetricType type,
               Labels labels, double value) {
  families.push_back(net::MetricFamily(name, help, type));
  net::AddSample(families.back(), std::move(labels), value);
}

Labels With(Labels labels, std::string name, std::string value) {
  labels.push_back({std::move(name), std::move(value)});
  return labels;
}

}  // namespace

DaemonMetrics::RunningTask::RunningTask(TaskInfo task)
    : info(std::move(task)), step_durations(StepDurationBuckets()) {}

DaemonMetrics::DaemonMetrics(std::string worker_id, std::string node,
                             std::string blas_core)
    : worker_id_(std::move(worker_id)),
      node_(std::move(node)),
      blas_core_(std::move(blas_core)),
      tasks_by_outcome_({{"succeeded", 0}, {"failed", 0}, {"stopped", 0}}) {}

void DaemonMetrics::SetRegistered(bool registered) {
  absl::MutexLock lock(&mutex_);
  registered_ = registered;
}

void DaemonMetrics::HeartbeatFailed() {
  absl::MutexLock lock(&mutex_);
  ++heartbeat_failures_;
}

void DaemonMetrics::TaskStarted(TaskInfo task) {
  absl::MutexLock lock(&mutex_);
  task_.emplace(std::move(task));
}

void DaemonMetrics::StepDone(const chimera::v1::WorkerStepMetrics& step) {
  absl::MutexLock lock(&mutex_);
  ++steps_;
  if (!task_) return;
  task_->last_step = step;
  AddSecondsByOp(step.seconds_by_op(), task_->seconds_by_op);
  task_->step_durations.Observe(step.step_seconds());
}

void DaemonMetrics::TaskEnded(const std::string& outcome) {
  absl::MutexLock lock(&mutex_);
  ++tasks_by_outcome_[outcome];
  task_.reset();
}

std::vector<prometheus::MetricFamily> DaemonMetrics::Collect() const {
  absl::MutexLock lock(&mutex_);
  std::vector<prometheus::MetricFamily> families;
  CollectDaemon(families);
  if (!task_) return families;
  AddFamily(families, "chimera_worker_task",
            "The task this worker runs (1 while it runs)", MetricType::Gauge,
            TaskLabels(), 1);
  AddFamily(families, "chimera_worker_memory_limit_bytes",
            "Memory of the device the task computes on", MetricType::Gauge,
            TaskLabels(), static_cast<double>(task_->info.memory_limit_bytes));
  if (!task_->last_step) return families;
  CollectLastStep(families);
  CollectTaskTotals(families);
  return families;
}

void DaemonMetrics::CollectDaemon(
    std::vector<prometheus::MetricFamily>& families) const {
  AddFamily(families, "chimera_worker_info",
            "This worker's name, node, version and the OpenBLAS core its tasks "
            "run (always 1)",
            MetricType::Gauge,
            {{"worker", worker_id_},
             {"node", node_},
             {"version", kVersion},
             {"blas_core", blas_core_}},
            1);
  AddFamily(families, "chimera_worker_registered",
            "1 while registered with the coordinator", MetricType::Gauge, {},
            registered_ ? 1 : 0);
  AddFamily(families, "chimera_worker_steps_total",
            "Training steps this worker completed", MetricType::Counter, {},
            steps_);
  AddFamily(families, "chimera_worker_heartbeat_failures_total",
            "Heartbeats the coordinator did not take", MetricType::Counter, {},
            heartbeat_failures_);
  families.push_back(net::MetricFamily("chimera_worker_tasks_total",
                                       "Tasks ended, by outcome",
                                       MetricType::Counter));
  for (const auto& [outcome, count] : tasks_by_outcome_) {
    net::AddSample(families.back(), {{"outcome", outcome}}, count);
  }
}

void DaemonMetrics::CollectLastStep(
    std::vector<prometheus::MetricFamily>& families) const {
  const Labels task = TaskLabels();
  const chimera::v1::WorkerStepMetrics& step = *task_->last_step;
  const double seconds = step.step_seconds();
  auto share = [seconds](double amount) {
    return seconds > 0 ? amount / seconds : 0;
  };
  const std::vector<std::tuple<const char*, const char*, double>> gauges = {
      {"chimera_worker_step", "Last step completed", step.step()},
      {"chimera_worker_loss",
       "This rank's share of the last step's loss (its last-stage "
       "micro-batches; 0 on other ranks): chimera_job_loss is the job's",
       step.loss()},
      {"chimera_worker_step_seconds", "Wall time of the last step", seconds},
      {"chimera_worker_busy_ratio",
       "Share of the last step spent computing (forward, backward, optimizer)",
       share(step.busy_seconds())},
      {"chimera_worker_bubble_ratio", "Idle share of the last step",
       schedule::BubbleRatio(step.bubble_seconds(), seconds)},
      {"chimera_worker_samples_per_second",
       "Samples this rank's last-stage micro-batches trained per second",
       share(step.samples())},
      {"chimera_worker_tokens_per_second",
       "Tokens this rank's last-stage micro-batches trained per second",
       share(step.tokens())},
      {"chimera_worker_recv_wait_seconds",
       "Time blocked on receives in the last step", step.recv_wait_seconds()},
      {"chimera_worker_exposed_allreduce_seconds",
       "Gradient allreduce time not hidden behind compute in the last step",
       step.exposed_allreduce_seconds()},
  };
  for (const auto& [name, help, value] : gauges) {
    AddFamily(families, name, help, MetricType::Gauge, task, value);
  }
  families.push_back(net::MetricFamily(
      "chimera_worker_memory_bytes",
      "Memory at the last step's peak by what holds it (weights, gradients, "
      "optimizer, activations = the rest) and the peak itself",
      MetricType::Gauge));
  for (const auto& [kind, bytes] : std::vector<std::pair<const char*, int64_t>>{
           {"weights", step.weights_bytes()},
           {"gradients", step.gradients_bytes()},
           {"optimizer", step.optimizer_bytes()},
           {"activations", step.activations_bytes()},
           {"peak", step.peak_memory_bytes()}}) {
    net::AddSample(families.back(), With(task, "kind", kind),
                   static_cast<double>(bytes));
  }
}

void DaemonMetrics::CollectTaskTotals(
    std::vector<prometheus::MetricFamily>& families) const {
  const Labels task = TaskLabels();
  families.push_back(net::MetricFamily(
      "chimera_worker_op_seconds_total",
      "Seconds the task's instructions took, by kind (recv includes waiting)",
      MetricType::Counter));
  const chimera::v1::SecondsByOp& by_op = task_->seconds_by_op;
  const google::protobuf::Descriptor* descriptor = by_op.GetDescriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = descriptor->field(i);
    net::AddSample(families.back(), With(task, "op", field->name()),
                   by_op.GetReflection()->GetDouble(by_op, field));
  }
  families.push_back(net::MetricFamily("chimera_worker_step_duration_seconds",
                                       "Wall time of the task's steps",
                                       MetricType::Histogram));
  prometheus::ClientMetric histogram = task_->step_durations.Collect();
  histogram.label = task;
  families.back().metric.push_back(std::move(histogram));
}

std::vector<prometheus::ClientMetric::Label> DaemonMetrics::TaskLabels() const {
  Labels labels = {{"train_job", task_->info.job_id},
                   {"rank", std::to_string(task_->info.rank)}};
  if (task_->info.gpu) {
    labels.push_back({"gpu", std::to_string(*task_->info.gpu)});
  }
  return labels;
}

}  // namespace chimera::worker
