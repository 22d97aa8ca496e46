#include "coordinator/coordinator_metrics.h"

#include <map>

#include "absl/strings/ascii.h"
#include "common/version.h"
#include "net/metric_families.h"

namespace chimera::coordinator {
namespace {

using prometheus::MetricType;

// "JOB_STATE_RUNNING" -> "running".
std::string StateLabel(const std::string& enum_name,
                       const std::string& prefix) {
  return absl::AsciiStrToLower(enum_name.substr(prefix.size()));
}

}  // namespace

std::vector<prometheus::MetricFamily> CoordinatorMetrics::Collect() const {
  std::vector<prometheus::MetricFamily> families;

  prometheus::MetricFamily jobs =
      net::MetricFamily("chimera_jobs", "Jobs the coordinator knows, by state",
                   MetricType::Gauge);
  std::map<std::string, int> job_counts;
  for (int state = chimera::v1::JOB_STATE_PENDING;
       state <= chimera::v1::JOB_STATE_FAILED; ++state) {
    job_counts[StateLabel(chimera::v1::JobState_Name(state), "JOB_STATE_")] = 0;
  }
  if (auto listed = jobs_->List(chimera::v1::JOB_STATE_UNSPECIFIED);
      listed.ok()) {
    for (const auto& job : *listed) {
      ++job_counts[StateLabel(chimera::v1::JobState_Name(job.status().state()),
                              "JOB_STATE_")];
    }
  }
  for (const auto& [state, count] : job_counts)
    net::AddSample(jobs, {{"state", state}}, count);
  families.push_back(std::move(jobs));

  prometheus::MetricFamily workers = net::MetricFamily(
      "chimera_workers", "Registered workers, by state", MetricType::Gauge);
  prometheus::MetricFamily heartbeats = net::MetricFamily(
      "chimera_worker_last_heartbeat_timestamp_seconds",
      "Unix time of each worker's last heartbeat", MetricType::Gauge);
  std::map<std::string, int> worker_counts = {
      {"idle", 0}, {"busy", 0}, {"dead", 0}};
  for (const auto& worker : workers_->List()) {
    ++worker_counts[StateLabel(chimera::v1::WorkerState_Name(worker.state()),
                               "WORKER_STATE_")];
    net::AddSample(heartbeats, {{"worker", worker.worker_id()}},
              worker.last_heartbeat_time());
  }
  for (const auto& [state, count] : worker_counts)
    net::AddSample(workers, {{"state", state}}, count);
  families.push_back(std::move(workers));
  families.push_back(std::move(heartbeats));

  prometheus::MetricFamily build =
      net::MetricFamily("chimera_build_info", "The running version (always 1)",
                   MetricType::Gauge);
  net::AddSample(build, {{"version", kVersion}}, 1);
  families.push_back(std::move(build));
  return families;
}

}  // namespace chimera::coordinator
