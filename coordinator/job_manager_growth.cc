// JobManager, growing shrunk jobs back: while no job is queued, the plan of
// a run on fewer workers than its job asks for is searched with the idle
// workers added (job_growth.h decides whether that is worth it), and the
// run ends at its next checkpoint to start again on them.
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "coordinator/job_growth.h"
#include "coordinator/job_manager.h"

namespace chimera::coordinator {

using chimera::v1::Job;

void JobManager::PlanGrowth() {
  std::optional<GrowthSearch> next;
  {
    absl::MutexLock lock(&mutex_);
    next = NextGrowthLocked();
  }
  if (!next) return;
  const std::string& key = next->grow.key;
  planner_.Start(key, [this, manifest = next->manifest, profile = next->profile,
                       workers = next->grow.workers](
                          const std::function<bool()>& cancelled) {
    return launcher_.LaunchFor(manifest, profile, workers, cancelled);
  });
  std::optional<absl::StatusOr<Launch>> launch =
      planner_.Take(key, options_.plan_wait);
  if (!launch) return;  // Still searching: a later tick takes it.
  absl::MutexLock lock(&mutex_);
  auto run = runs_.find(next->job_id);
  absl::StatusOr<Job> job = table_.Get(next->job_id);
  if (run == runs_.end() || !job.ok()) return;
  Growth growth{key, std::nullopt};
  if (launch->ok()) {
    growth.reason = WorthGrowing(*job, job->plan(), (*launch)->plan);
  } else {
    CHIMERA_LOG(WARNING) << "job " << job->id() << " cannot grow to "
                         << next->grow.workers.size()
                         << " workers: " << launch->status();
  }
  if (growth.reason) {
    CHIMERA_LOG(INFO) << "job " << job->id() << ": " << *growth.reason
                      << " at its next checkpoint";
  }
  run->second.growth = std::move(growth);
}

std::optional<JobManager::GrowthSearch> JobManager::NextGrowthLocked() {
  // Idle workers go to the queue first.
  if (workers_->IdleWorkers().empty() ||
      table_.OldestLive(chimera::v1::JOB_STATE_PENDING)) {
    return std::nullopt;
  }
  for (const auto& [id, run] : runs_) {
    absl::StatusOr<Job> job = table_.Get(id);
    if (!job.ok()) continue;
    std::optional<GrowthWorkers> grow = GrowthWorkersLocked(*job, run);
    if (!grow || (run.growth && run.growth->key == grow->key)) continue;
    return GrowthSearch{id, job->manifest(), job->profile(), *std::move(grow)};
  }
  return std::nullopt;
}

std::optional<GrowthWorkers> JobManager::GrowthWorkersLocked(
    const Job& job, const JobRun& run) const {
  // A run under way: past its rendezvous, every rank's worker known.
  if (!run.rendezvous_done ||
      run.PlacedWorkers().size() < run.worker_of_rank.size()) {
    return std::nullopt;
  }
  return GrowthWorkersFor(job, run.worker_of_rank,
                          launcher_.IdleWorkersOffering(job));
}

absl::StatusOr<bool> JobManager::GrowAtCheckpointLocked(const Job& job,
                                                        const JobRun& run) {
  const int checkpoint = job.status().checkpoint_step();
  if (!run.growth || !run.growth->reason ||
      checkpoint >= job.manifest().spec().training().max_steps()) {
    return false;
  }
  // The idle workers changed since it was judged: judged again first.
  const std::optional<GrowthWorkers> grow = GrowthWorkersLocked(job, run);
  if (!grow || grow->key != run.growth->key) return false;
  const std::string reason =
      absl::StrCat(*run.growth->reason, " at step ", checkpoint);
  RETURN_IF_ERROR(EndRunLocked(job.id(), JobEvent::Growing(reason)));
  return true;
}

}  // namespace chimera::coordinator
