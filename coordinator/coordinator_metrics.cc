#include "coordinator/coordinator_metrics.h"

#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "common/version.h"
#include "coordinator/job_launcher.h"
#include "net/metric_families.h"
#include "planner/analytic_profile.h"

namespace chimera::coordinator {
namespace {

using chimera::v1::Job;
using Labels = std::vector<prometheus::ClientMetric::Label>;
using prometheus::MetricType;

// "JOB_STATE_RUNNING" -> "running".
std::string StateLabel(const std::string& enum_name,
                       const std::string& prefix) {
  return absl::AsciiStrToLower(enum_name.substr(prefix.size()));
}

prometheus::MetricFamily JobCounts(const std::vector<Job>& jobs) {
  prometheus::MetricFamily family =
      net::MetricFamily("chimera_jobs", "Jobs the coordinator knows, by state",
                        MetricType::Gauge);
  std::map<std::string, int> counts;
  for (int state = chimera::v1::JOB_STATE_PENDING;
       state <= chimera::v1::JOB_STATE_FAILED; ++state) {
    counts[StateLabel(chimera::v1::JobState_Name(state), "JOB_STATE_")] = 0;
  }
  for (const Job& job : jobs) {
    ++counts[StateLabel(chimera::v1::JobState_Name(job.status().state()),
                        "JOB_STATE_")];
  }
  for (const auto& [state, count] : counts)
    net::AddSample(family, {{"state", state}}, count);
  return family;
}

void AddWorkerFamilies(const std::vector<chimera::v1::WorkerInfo>& registered,
                       std::vector<prometheus::MetricFamily>& families) {
  prometheus::MetricFamily workers = net::MetricFamily(
      "chimera_workers", "Registered workers, by state", MetricType::Gauge);
  prometheus::MetricFamily heartbeats = net::MetricFamily(
      "chimera_worker_last_heartbeat_timestamp_seconds",
      "Unix time of each worker's last heartbeat", MetricType::Gauge);
  std::map<std::string, int> counts = {{"idle", 0}, {"busy", 0}, {"dead", 0}};
  for (const auto& worker : registered) {
    ++counts[StateLabel(chimera::v1::WorkerState_Name(worker.state()),
                        "WORKER_STATE_")];
    net::AddSample(heartbeats, {{"worker", worker.worker_id()}},
                   worker.last_heartbeat_time());
  }
  for (const auto& [state, count] : counts)
    net::AddSample(workers, {{"state", state}}, count);
  families.push_back(std::move(workers));
  families.push_back(std::move(heartbeats));
}

// chimera_job_recoveries_total{cause} and the histogram of how long each
// recovery kept its job from training.
void AddRecoveryFamilies(const RecoveryCounts& counts,
                         std::vector<prometheus::MetricFamily>& families) {
  prometheus::MetricFamily recoveries = net::MetricFamily(
      "chimera_job_recoveries_total",
      "Runs of jobs queued again since the coordinator started: lost (a "
      "worker, a task, a stall, ...) or ended to grow, by cause",
      MetricType::Counter);
  for (const auto& [cause, count] : counts.by_cause) {
    net::AddSample(recoveries, {{"cause", RecoveryCauseName(cause)}}, count);
  }
  families.push_back(std::move(recoveries));

  prometheus::MetricFamily durations = net::MetricFamily(
      "chimera_job_recovery_duration_seconds",
      "From a run's end to the first step of the job's next run",
      MetricType::Histogram);
  prometheus::ClientMetric metric;
  metric.histogram.sample_count = counts.observed;
  metric.histogram.sample_sum = counts.seconds;
  for (size_t i = 0; i < kRecoveryBuckets.size(); ++i) {
    metric.histogram.bucket.push_back(
        {static_cast<uint64_t>(counts.at_most[i]), kRecoveryBuckets[i]});
  }
  metric.histogram.bucket.push_back({static_cast<uint64_t>(counts.observed),
                                     std::numeric_limits<double>::infinity()});
  durations.metric.push_back(std::move(metric));
  families.push_back(std::move(durations));
}

// One gauge per running job, labelled train_job; `value` is none where the
// job has nothing to say yet (no step done, no prediction).
struct JobGauge {
  const char* name;
  const char* help;
  std::function<std::optional<double>(const Job&)> value;
};

std::optional<double> AfterFirstStep(const Job& job, double value) {
  if (job.status().completed_steps() == 0) return std::nullopt;
  return value;
}

// The last step's samples/s times a sample's model FLOPs.
double ModelFlopsPerSecond(const Job& job) {
  return job.status().last_step().samples_per_second() *
         planner::ModelFlopsPerSample(job.manifest().spec().model());
}

std::optional<double> Predicted(double value) {
  if (value <= 0) return std::nullopt;
  return value;
}

const std::vector<JobGauge>& JobGauges() {
  static const auto* gauges = new std::vector<JobGauge>{
      {"chimera_job_step", "Last step the job completed (every rank)",
       [](const Job& j) {
         return AfterFirstStep(j, j.status().last_step().step());
       }},
      {"chimera_job_loss", "Mean loss of the job's last step",
       [](const Job& j) {
         return AfterFirstStep(j, j.status().last_step().loss());
       }},
      {"chimera_job_step_seconds",
       "Wall time of the job's last step (its slowest rank)",
       [](const Job& j) {
         return AfterFirstStep(j, j.status().last_step().step_seconds());
       }},
      {"chimera_job_samples_per_second", "Samples the job trains per second",
       [](const Job& j) {
         return AfterFirstStep(j, j.status().last_step().samples_per_second());
       }},
      {"chimera_job_model_flops_per_second",
       "Model FLOPs the job trains per second: samples/s times a sample's "
       "forward and backward FLOPs (3x the forward's, recomputation not "
       "counted)",
       [](const Job& j) { return AfterFirstStep(j, ModelFlopsPerSecond(j)); }},
      {"chimera_job_tokens_per_second", "Tokens the job trains per second",
       [](const Job& j) {
         return AfterFirstStep(j, j.status().last_step().tokens_per_second());
       }},
      {"chimera_job_last_step_timestamp_seconds",
       "Unix time the job's last step completed (its start before the first)",
       [](const Job& j) -> std::optional<double> {
         return j.status().completed_steps() > 0
                    ? j.status().last_step().end_time()
                    : j.status().start_time();
       }},
      {"chimera_job_straggling_ranks",
       "Ranks of the job's run whose compute ran over 1.5x their peers' "
       "median (against the plan's prediction) for 5 steps in a row",
       [](const Job& j) -> std::optional<double> {
         return j.status().stragglers_size();
       }},
      {"chimera_job_predicted_step_seconds",
       "Step time the simulator predicts for the job's plan",
       [](const Job& j) {
         return Predicted(j.plan().prediction().iteration_seconds());
       }},
      {"chimera_job_predicted_bubble_ratio",
       "Mean idle share of a step the simulator predicts for the job's plan",
       [](const Job& j) {
         return Predicted(j.plan().prediction().bubble_ratio());
       }},
      {"chimera_job_predicted_samples_per_second",
       "Throughput the simulator predicts for the job's plan",
       [](const Job& j) {
         return Predicted(j.plan().prediction().samples_per_second());
       }},
  };
  return *gauges;
}

Labels PlanLabels(const Job& job) {
  const chimera::v1::Plan& plan = job.plan();
  return {{"train_job", job.id()},
          {"name", job.manifest().metadata().name()},
          {"scheme", plan.scheme()},
          {"width", std::to_string(plan.width())},
          {"depth", std::to_string(plan.depth())},
          {"micro_batch_size", std::to_string(plan.micro_batch_size())},
          {"micro_batches", std::to_string(plan.micro_batches())},
          {"pipelines", std::to_string(plan.pipelines())},
          {"chunks", std::to_string(plan.chunks())}};
}

// The summed peak FLOP/s of the devices a job's ranks compute on; nullopt
// unless every rank's worker is registered and reports its device's peak.
std::optional<double> PeakFlopsOf(
    const Job& job,
    const std::map<std::string, chimera::v1::WorkerInfo>& workers) {
  if (job.workers().empty()) return std::nullopt;
  const std::string kind = DeviceKindOf(job.manifest());
  double total = 0;
  for (const chimera::v1::WorkerSummary& rank : job.workers()) {
    const auto worker = workers.find(rank.worker_id());
    if (worker == workers.end()) return std::nullopt;
    const chimera::v1::Device* device = DeviceOfKind(worker->second, kind);
    if (device == nullptr || !(device->peak_flops() > 0)) return std::nullopt;
    total += device->peak_flops();
  }
  return total;
}

// chimera_job_model_flops_utilization: each running job's model FLOP/s over
// its devices' summed peak, where they report one.
void AddUtilizationFamily(
    const std::vector<Job>& running,
    const std::vector<chimera::v1::WorkerInfo>& registered,
    std::vector<prometheus::MetricFamily>& families) {
  std::map<std::string, chimera::v1::WorkerInfo> workers;
  for (const chimera::v1::WorkerInfo& worker : registered) {
    workers[worker.worker_id()] = worker;
  }
  prometheus::MetricFamily family = net::MetricFamily(
      "chimera_job_model_flops_utilization",
      "The job's model FLOP/s over the summed peak FLOP/s of the devices its "
      "ranks compute on (MFU), where every worker reports its peak",
      MetricType::Gauge);
  for (const Job& job : running) {
    const std::optional<double> peak = PeakFlopsOf(job, workers);
    if (!peak || job.status().completed_steps() == 0) continue;
    net::AddSample(family, {{"train_job", job.id()}},
                   ModelFlopsPerSecond(job) / *peak);
  }
  if (!family.metric.empty()) families.push_back(std::move(family));
}

// What the coordinator knows of its running jobs: their plan, what the
// simulator predicted for it, and their last step.
void AddRunningJobFamilies(const std::vector<Job>& running,
                           std::vector<prometheus::MetricFamily>& families) {
  if (running.empty()) return;
  families.push_back(net::MetricFamily(
      "chimera_job_plan_info", "The plan each running job runs (always 1)",
      MetricType::Gauge));
  for (const Job& job : running)
    net::AddSample(families.back(), PlanLabels(job), 1);

  for (const JobGauge& gauge : JobGauges()) {
    prometheus::MetricFamily family =
        net::MetricFamily(gauge.name, gauge.help, MetricType::Gauge);
    for (const Job& job : running) {
      if (std::optional<double> value = gauge.value(job))
        net::AddSample(family, {{"train_job", job.id()}}, *value);
    }
    if (!family.metric.empty()) families.push_back(std::move(family));
  }

  prometheus::MetricFamily bubbles = net::MetricFamily(
      "chimera_job_bubble_ratio", "Idle share of each rank's last step",
      MetricType::Gauge);
  for (const Job& job : running) {
    for (const chimera::v1::WorkerSummary& worker : job.workers()) {
      net::AddSample(bubbles,
                     {{"train_job", job.id()},
                      {"rank", std::to_string(worker.rank())},
                      {"worker", worker.worker_id()}},
                     worker.bubble_ratio());
    }
  }
  if (!bubbles.metric.empty()) families.push_back(std::move(bubbles));
}

}  // namespace

std::vector<prometheus::MetricFamily> CoordinatorMetrics::Collect() const {
  std::vector<Job> jobs;
  if (auto listed = jobs_->List(chimera::v1::JOB_STATE_UNSPECIFIED);
      listed.ok()) {
    jobs = *std::move(listed);
  }
  std::vector<Job> running;
  for (const Job& job : jobs) {
    if (job.status().state() == chimera::v1::JOB_STATE_RUNNING)
      running.push_back(job);
  }

  std::vector<prometheus::MetricFamily> families;
  families.push_back(JobCounts(jobs));
  const std::vector<chimera::v1::WorkerInfo> registered = workers_->List();
  AddWorkerFamilies(registered, families);
  AddRunningJobFamilies(running, families);
  AddUtilizationFamily(running, registered, families);
  AddRecoveryFamilies(jobs_->Recoveries(), families);
  prometheus::MetricFamily build =
      net::MetricFamily("chimera_build_info", "The running version (always 1)",
                        MetricType::Gauge);
  net::AddSample(build, {{"version", kVersion}}, 1);
  families.push_back(std::move(build));
  return families;
}

}  // namespace chimera::coordinator
