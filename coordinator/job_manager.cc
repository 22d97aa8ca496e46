#include "coordinator/job_manager.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <set>

#include "absl/algorithm/container.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "coordinator/job_states.h"
#include "jobspec/job_validator.h"
#include "net/server_address.h"
#include "planner/analytic_profile.h"
#include "planner/plan_evaluator.h"
#include "planner/plan_params.h"
#include "planner/plan_search.h"

namespace chimera::coordinator {
namespace {

using chimera::v1::Job;
using chimera::v1::JobState;

// "cpu" or "gpu": what each of the job's workers computes on.
std::string DeviceKindOf(const chimera::v1::TrainJob& job) {
  const std::string& device = job.spec().resources().device();
  return device.empty() ? "cpu" : device;
}

}  // namespace

JobManager::JobManager(JobStore* store, WorkerRegistry* workers,
                       JobManagerOptions options, Clock clock)
    : store_(store),
      workers_(workers),
      options_(std::move(options)),
      clock_(std::move(clock)),
      table_(store) {}

absl::Status JobManager::SaveLocked(const Job& job) {
  RETURN_IF_ERROR(table_.Put(job));
  ++version_;
  return absl::OkStatus();
}

absl::Status JobManager::Recover() {
  absl::MutexLock lock(&mutex_);
  RETURN_IF_ERROR(table_.Load());
  for (const Job& job : table_.Live(chimera::v1::JOB_STATE_RUNNING)) {
    const int ranks = job.plan().width() * job.plan().depth();
    if (ranks <= 0) {
      const std::string cause =
          "the coordinator restarted and found the job without its plan";
      RETURN_IF_ERROR(EndRunLocked(job.id(), JobEvent::RunLost(cause)));
      continue;
    }
    // Its workers go on training: it waits for them to register again.
    JobRun run = JobRun::For(job, job.plan(), ranks, clock_.monotonic(), clock_.wall());
    run.worker_of_rank.assign(ranks, "");
    run.rendezvous_done = true;
    run.readopt_by = clock_.monotonic() + options_.readopt_timeout;
    runs_[job.id()] = std::move(run);
    CHIMERA_LOG(INFO) << "job " << job.id() << " was running: waiting up to "
                      << absl::FormatDuration(options_.readopt_timeout)
                      << " for its " << ranks
                      << " workers to register again";
  }
  return absl::OkStatus();
}

bool JobManager::Adopt(const std::string& worker_id,
                       const chimera::v1::HeldTask& task) {
  absl::MutexLock lock(&mutex_);
  auto it = runs_.find(task.job_id());
  if (it == runs_.end()) return false;
  JobRun& run = it->second;
  const int rank = task.rank();
  if (run.readopt_by == absl::InfiniteFuture() ||
      run.attempt != task.attempt() || rank < 0 ||
      rank >= static_cast<int>(run.worker_of_rank.size()) ||
      !run.worker_of_rank[rank].empty()) {
    return false;
  }
  const bool running = task.state() == chimera::v1::TASK_STATE_RUNNING;
  if (running && !workers_->Assign(worker_id, {task.job_id(), run.attempt, rank},
                                   std::nullopt)
                      .ok()) {
    return false;
  }
  run.worker_of_rank[rank] = worker_id;
  CHIMERA_LOG(INFO) << "job " << task.job_id() << ": rank " << rank
                    << " is back on worker " << worker_id;
  if (absl::c_none_of(run.worker_of_rank,
                      [](const std::string& w) { return w.empty(); })) {
    run.readopt_by = absl::InfiniteFuture();
    CHIMERA_LOG(INFO) << "job " << task.job_id()
                      << ": every rank is back; it goes on";
  }
  if (running) return true;
  const absl::Status ended =
      RankEndedLocked(task.job_id(), &run, rank, worker_id,
                      {task.state(), task.message(), task.retryable()});
  if (!ended.ok()) CHIMERA_LOG(ERROR) << ended;
  return false;
}

void JobManager::GiveUpUnadoptedRunsLocked() {
  // Collected first: restarting or failing erases from runs_.
  std::vector<std::pair<std::string, std::string>> abandoned;
  for (const auto& [id, run] : runs_) {
    if (auto why = run.Unadopted(clock_.monotonic(), options_.readopt_timeout)) {
      abandoned.push_back({id, *std::move(why)});
    }
  }
  for (const auto& [id, cause] : abandoned) {
    const absl::Status status = EndRunLocked(id, JobEvent::RunLost(cause));
    if (!status.ok()) CHIMERA_LOG(ERROR) << status;
  }
}

chimera::v1::ClusterLinks DefaultLinks() {
  chimera::v1::ClusterLinks links;
  for (chimera::v1::LinkSpec* link : {links.mutable_intra_node(), links.mutable_inter_node()}) {
    link->set_latency_seconds(kDefaultLinkLatencySeconds);
    link->set_bandwidth_bytes_per_second(kDefaultLinkBandwidth);
    link->set_collective_latency_seconds(kDefaultLinkCollectiveLatencySeconds);
  }
  return links;
}

absl::StatusOr<Job> JobManager::Submit(const chimera::v1::TrainJob& manifest) {
  RETURN_IF_ERROR(
      jobspec::ValidateJob(manifest, chimera::jobspec::SpecOnly()).ToStatus());
  const int needed = manifest.spec().resources().workers();
  if (options_.max_workers > 0 && needed > options_.max_workers) {
    return absl::FailedPreconditionError(absl::StrCat(
        "spec.resources.workers: the job needs ", needed,
        " workers; this coordinator can have at most ", options_.max_workers));
  }
  RETURN_IF_ERROR(CheckFitsRegisteredWorkers(manifest));
  absl::MutexLock lock(&mutex_);
  Job job;
  absl::BitGen random;
  do {
    job.set_id(absl::StrFormat("%s-%08x", manifest.metadata().name(),
                               absl::Uniform<uint32_t>(random)));
  } while (!absl::IsNotFound(table_.Get(job.id()).status()));
  *job.mutable_manifest() = manifest;
  ASSIGN_OR_RETURN(job, Transition(std::move(job), JobEvent::Submitted(),
                                   clock_.wall()));
  RETURN_IF_ERROR(SaveLocked(job));
  CHIMERA_LOG(INFO) << "job " << job.id() << " submitted ("
                    << (needed > 0 ? absl::StrCat(needed) : "all idle")
                    << " workers)";
  return job;
}

absl::Status JobManager::CheckFitsRegisteredWorkers(
    const chimera::v1::TrainJob& manifest) const {
  if (!planner::FixedPlan(manifest)) return absl::OkStatus();
  const std::string device = DeviceKindOf(manifest);
  std::vector<std::string> registered;
  for (const chimera::v1::WorkerInfo& worker : workers_->List()) {
    if (worker.state() != chimera::v1::WORKER_STATE_DEAD &&
        DeviceIndex(worker, device).has_value()) {
      registered.push_back(worker.worker_id());
    }
  }
  const int needed = planner::MinimumWorkers(manifest);
  if (static_cast<int>(registered.size()) < needed) return absl::OkStatus();
  registered.resize(needed);
  const absl::Time deadline = clock_.monotonic() + kSubmitFitBudget;
  const absl::StatusOr<std::vector<chimera::v1::Plan>> searched = SearchPlans(
      manifest, registered, 1,
      [this, deadline] { return clock_.monotonic() >= deadline; });
  // Only a verdict counts: a search cut short leaves it to the start.
  if (!absl::IsFailedPrecondition(searched.status())) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("spec.parallelism: on the ", needed, " registered ", device,
                   " workers, ", searched.status().message()));
}

absl::StatusOr<Job> JobManager::Get(const std::string& id) {
  {
    absl::MutexLock lock(&mutex_);
    if (std::optional<Job> live = table_.FindLive(id)) return *std::move(live);
  }
  // Ended (or unknown): what the store holds, read without the lock. A job
  // that ended meanwhile was written there before it left the live ones.
  return store_->Get(id);
}

absl::StatusOr<std::vector<Job>> JobManager::List(JobState state) {
  ASSIGN_OR_RETURN(JobPage all,
                   ListPage(state, 0, std::numeric_limits<int>::max(),
                            std::numeric_limits<int64_t>::max()));
  return std::move(all.jobs);
}

absl::StatusOr<JobManager::JobPage> JobManager::ListPage(JobState state,
                                                        int64_t after_seq,
                                                        int max_jobs,
                                                        int64_t max_bytes) {
  JobPage page;
  int64_t bytes = 0;
  // The store is read in chunks, since a state filter may skip most rows.
  const int chunk = std::max(max_jobs, 64);
  while (true) {
    // The store holds what the table shows: it is read without the lock.
    ASSIGN_OR_RETURN(JobStore::Chunk stored, store_->ListAfter(after_seq, chunk));
    for (JobStore::Sequenced& row : stored.jobs) {
      Job& job = row.job;
      if (state != JobState::JOB_STATE_UNSPECIFIED && job.status().state() != state) {
        after_seq = row.seq;
        continue;
      }
      const int64_t size = static_cast<int64_t>(job.ByteSizeLong());
      if (static_cast<int>(page.jobs.size()) == max_jobs ||
          (!page.jobs.empty() && bytes + size > max_bytes)) {
        page.next_after_seq = after_seq;
        return page;
      }
      bytes += size;
      after_seq = row.seq;
      page.jobs.push_back(std::move(job));
    }
    if (stored.end) return page;
    after_seq = stored.last_seq;
  }
}

absl::StatusOr<std::vector<chimera::v1::StepSummary>> JobManager::Steps(
    const std::string& id, int after) {
  RETURN_IF_ERROR(Get(id).status());
  return store_->Steps(id, after);
}

absl::StatusOr<Job> JobManager::Stop(const std::string& id) {
  absl::MutexLock lock(&mutex_);
  ASSIGN_OR_RETURN(Job job, table_.Get(id));
  const JobState state = job.status().state();
  if (IsTerminal(state)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", id, " has already ended (", JobStateName(state), ")"));
  }
  // A request: refused, rather than kept, while the store takes no change.
  RETURN_IF_ERROR(table_.Writable());
  RETURN_IF_ERROR(EndRunLocked(id, JobEvent::StopRequested()));
  return table_.Get(id);
}

absl::Status JobManager::Delete(const std::string& id) {
  absl::MutexLock lock(&mutex_);
  ASSIGN_OR_RETURN(Job job, table_.Get(id));
  if (!IsTerminal(job.status().state())) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " is ", JobStateName(job.status().state()),
                     "; stop it first"));
  }
  RETURN_IF_ERROR(table_.Delete(id));
  ++version_;
  return absl::OkStatus();
}

chimera::v1::Cluster JobManager::ClusterOf(
    const std::vector<std::string>& worker_ids, const std::string& device_kind) const {
  std::map<std::string, int> per_node;
  int64_t memory = 0;
  // CPU workers of one node share its cores: the fewest any reports (0 if
  // one does not).
  std::optional<int> cores;
  for (const std::string& id : worker_ids) {
    absl::StatusOr<chimera::v1::WorkerInfo> info = workers_->Get(id);
    if (!info.ok()) continue;
    ++per_node[info->node()];
    if (memory == 0 || info->memory_bytes() < memory)
      memory = info->memory_bytes();
    cores = std::min(cores.value_or(info->cpu_cores()), info->cpu_cores());
  }
  int devices_per_node = 0;
  for (const auto& [node, count] : per_node)
    devices_per_node = std::max(devices_per_node, count);
  chimera::v1::Cluster cluster;
  cluster.mutable_metadata()->set_name("registered-workers");
  auto* spec = cluster.mutable_spec();
  spec->set_nodes(static_cast<int>(per_node.size()));
  spec->set_devices_per_node(devices_per_node);
  spec->mutable_device()->set_memory_bytes(memory);
  spec->mutable_device()->set_peak_flops(options_.device_peak_flops);
  if (device_kind == "cpu") {
    spec->mutable_device()->set_cores_per_node(cores.value_or(0));
    spec->mutable_device()->set_co_running_slowdown(options_.cpu_co_running_slowdown);
  }
  *spec->mutable_links() = options_.links;
  return cluster;
}

absl::StatusOr<std::vector<chimera::v1::Plan>> JobManager::Plans(
    const chimera::v1::TrainJob& manifest, int top_k,
    std::function<bool()> cancelled) {
  RETURN_IF_ERROR(
      jobspec::ValidateJob(manifest, chimera::jobspec::SpecOnly()).ToStatus());
  std::vector<std::string> alive;
  for (const auto& worker : workers_->List()) {
    if (worker.state() != chimera::v1::WORKER_STATE_DEAD)
      alive.push_back(worker.worker_id());
  }
  if (alive.empty()) {
    return absl::FailedPreconditionError(
        "no workers are registered to plan for");
  }
  return SearchPlans(manifest, alive, top_k, std::move(cancelled));
}

absl::StatusOr<std::vector<chimera::v1::Plan>> JobManager::SearchPlans(
    chimera::v1::TrainJob manifest, const std::vector<std::string>& worker_ids,
    int top_k, std::function<bool()> cancelled) const {
  const chimera::v1::Cluster cluster = ClusterOf(worker_ids, DeviceKindOf(manifest));
  // Workers left open: as many of these as the job can use.
  auto* resources = manifest.mutable_spec()->mutable_resources();
  if (resources->workers() == 0) {
    resources->set_workers(planner::WorkersToUse(manifest, worker_ids.size()));
  }
  const auto profile = planner::AnalyticProfile(manifest.spec().model(),
                                                cluster.spec().device());
  ASSIGN_OR_RETURN(planner::SearchResult result,
                   planner::SearchPlans(manifest, cluster, profile,
                                        {top_k, std::move(cancelled)}));
  std::vector<chimera::v1::Plan> plans;
  for (const planner::Evaluation& evaluation : result.ranked)
    plans.push_back(evaluation.plan);
  return plans;
}

absl::StatusOr<Launch> JobManager::LaunchFor(
    const Job& job, const std::vector<std::string>& worker_ids,
    const std::function<bool()>& cancelled) const {
  // What the job leaves open, the planner chooses for these workers, also
  // where the job fixes scheme, pipeline and data. Where no variant fits in
  // the workers' memory the search says so, naming it, and the job fails
  // before any worker allocates (rather than by running out of memory).
  ASSIGN_OR_RETURN(std::vector<chimera::v1::Plan> searched,
                   SearchPlans(job.manifest(), worker_ids, 1, cancelled));
  return PrepareLaunch(std::move(searched.front()), options_.generate_schedule);
}

absl::Status JobManager::StartLocked(Job job,
                                     const std::vector<std::string>& chosen,
                                     Launch launch) {
  std::vector<chimera::v1::WorkerInfo> infos;
  for (const std::string& worker : chosen) {
    ASSIGN_OR_RETURN(infos.emplace_back(), workers_->Get(worker));
  }
  PlaceOnWorkers(infos, DeviceKindOf(job.manifest()), &launch.plan);
  *job.mutable_plan() = launch.plan;
  ASSIGN_OR_RETURN(job, Transition(std::move(job), JobEvent::Started(),
                                   clock_.wall()));
  ASSIGN_OR_RETURN(JobRun run,
                   AssignTasksLocked(job, std::move(launch), chosen));
  chimera::v1::Assignment first = std::move(run.held_starts.front());
  runs_[job.id()] = std::move(run);
  // Recorded before any worker hears of it: what the store cannot record
  // does not start.
  RETURN_IF_ERROR(SaveLocked(job));
  workers_->Send(chosen.front(), std::move(first));
  const chimera::v1::Plan& plan = job.plan();
  CHIMERA_LOG(INFO) << "job " << job.id() << " started on " << chosen.size()
                    << " workers (" << plan.scheme() << " W=" << plan.width()
                    << " D=" << plan.depth() << ")";
  return absl::OkStatus();
}

absl::StatusOr<JobRun> JobManager::AssignTasksLocked(
    const Job& job, Launch launch, const std::vector<std::string>& chosen) {
  const chimera::v1::Plan& plan = job.plan();
  JobRun run = JobRun::For(job, plan, static_cast<int>(chosen.size()),
                        clock_.monotonic(), clock_.wall());
  run.worker_of_rank = chosen;
  for (size_t rank = 0; rank < chosen.size(); ++rank) {
    chimera::v1::Assignment assignment;
    chimera::v1::StartTask* start = assignment.mutable_start();
    start->set_job_id(job.id());
    start->set_attempt(run.attempt);
    start->set_start_step(job.status().checkpoint_step());
    *start->mutable_manifest() = job.manifest();
    *start->mutable_plan() = plan;
    start->set_rank(static_cast<int>(rank));
    *start->mutable_program() = std::move(launch.programs[rank]);
    *start->mutable_outline() = launch.outline;
    start->mutable_rendezvous()->set_timeout_ms(
        absl::ToInt64Milliseconds(options_.collective_timeout));
    const TaskRef task{job.id(), run.attempt, static_cast<int>(rank)};
    if (absl::Status assigned = workers_->Assign(chosen[rank], task, std::nullopt);
        !assigned.ok()) {
      for (size_t earlier = 0; earlier < rank; ++earlier) {
        workers_->Release(chosen[earlier]);
      }
      return assigned;
    }
    run.held_starts.push_back(std::move(assignment));
  }
  return run;
}

void JobManager::WithdrawRunLocked(const std::string& id) {
  auto it = runs_.find(id);
  if (it == runs_.end()) return;
  for (const std::string& worker : it->second.worker_of_rank) {
    if (!worker.empty()) workers_->Release(worker);
  }
  runs_.erase(it);
}

void JobManager::StopRunLocked(const std::string& id) {
  auto it = runs_.find(id);
  if (it == runs_.end()) return;
  const JobRun& run = it->second;
  // A step recorded just before the run ended still answers its TraceJob.
  if (trace_waits_.Waiting(id)) {
    absl::StatusOr<std::optional<chimera::v1::JobTrace>> trace =
        CompleteTraceLocked(id, run);
    if (trace.ok() && *trace) trace_waits_.RunEnded(id, **std::move(trace));
  }
  for (size_t rank = 0; rank < run.worker_of_rank.size(); ++rank) {
    const std::string& worker = run.worker_of_rank[rank];
    if (worker.empty()) continue;  // Not back after a coordinator restart.
    if (!run.rank_done[rank]) {
      chimera::v1::Assignment stop;
      stop.mutable_stop()->set_job_id(id);
      stop.mutable_stop()->set_attempt(run.attempt);
      workers_->Send(worker, std::move(stop));
    }
    workers_->Release(worker);
  }
  runs_.erase(it);
}

absl::Status JobManager::EndRunLocked(const std::string& id,
                                      const JobEvent& event) {
  StopRunLocked(id);
  ASSIGN_OR_RETURN(Job job, table_.Get(id));
  ASSIGN_OR_RETURN(job, Transition(std::move(job), event, clock_.wall()));
  const JobState state = job.status().state();
  const std::string& message = job.status().message();
  if (state == chimera::v1::JOB_STATE_PENDING) {
    CHIMERA_LOG(WARNING) << "job " << id << ": " << message;
  } else {
    CHIMERA_LOG(INFO) << "job " << id << " " << JobStateName(state)
                      << (message.empty() ? "" : ": ") << message;
  }
  // Its run is over and its workers are free, recorded or not: the table
  // keeps what the store refuses and writes it at every tick.
  const absl::Status recorded = table_.Record(job);
  if (!recorded.ok()) {
    CHIMERA_LOG(ERROR) << "job " << id << " " << JobStateName(state)
                       << " but the job store cannot record it yet ("
                       << recorded << "); retrying every tick";
    return recorded;
  }
  ++version_;
  return absl::OkStatus();
}

void JobManager::OnWorkerLost(const std::string& worker_id, const TaskRef& task,
                              const std::string& reason) {
  absl::MutexLock lock(&mutex_);
  OnWorkerLostLocked(worker_id, task, reason);
}

void JobManager::OnWorkerLostLocked(const std::string& worker_id,
                                    const TaskRef& task,
                                    const std::string& reason) {
  auto it = runs_.find(task.job_id);
  if (it == runs_.end() || it->second.attempt != task.attempt) return;
  const std::string message =
      absl::StrCat("worker ", worker_id, " (rank ", task.rank, ") ", reason);
  const absl::Status status =
      EndRunLocked(task.job_id, JobEvent::RunLost(message));
  if (!status.ok()) CHIMERA_LOG(ERROR) << status;
}

void JobManager::ExcuseStall(absl::Duration stall) {
  absl::MutexLock lock(&mutex_);
  workers_->ExcuseSilence(stall);
  for (auto& [id, run] : runs_) run.Excuse(stall);
  CHIMERA_LOG(WARNING) << "the coordinator was stalled for "
                       << absl::FormatDuration(stall)
                       << "; no worker or job is blamed for that silence";
}

void JobManager::Tick() {
  {
    absl::MutexLock lock(&mutex_);
    if (table_.Retry() > 0) ++version_;
    ReapDeadWorkersLocked();
    GiveUpUnadoptedRunsLocked();
    FailOverdueRunsLocked();
  }
  StartQueuedJobs();
}

void JobManager::ReapDeadWorkersLocked() {
  for (const DeadWorker& dead : workers_->ReapDead()) {
    CHIMERA_LOG(WARNING) << "worker " << dead.worker_id
                         << " missed its heartbeats";
    if (!dead.task) continue;
    OnWorkerLostLocked(
        dead.worker_id, *dead.task,
        absl::StrCat("stopped sending heartbeats for ",
                     absl::FormatDuration(workers_->policy().DeadAfter())));
  }
}

void JobManager::FailOverdueRunsLocked() {
  // Collected first: ending or restarting a run erases it from runs_.
  std::vector<std::pair<std::string, RunVerdict>> overdue;
  const RunBounds bounds{options_.rendezvous_timeout, options_.progress_timeout};
  for (const auto& [id, run] : runs_) {
    if (auto verdict = run.Overdue(clock_.monotonic(), bounds)) {
      overdue.push_back({id, *std::move(verdict)});
    }
  }
  for (const auto& [id, verdict] : overdue) {
    const absl::Status status = EndRunLocked(
        id, verdict.retryable ? JobEvent::RunLost(verdict.reason)
                              : JobEvent::Failed(verdict.reason));
    if (!status.ok()) CHIMERA_LOG(ERROR) << status;
  }
}

void JobManager::StartQueuedJobs() {
  // Each job is tried once a tick: one whose failure could not be stored,
  // or whose workers changed while it was planned, waits for the next.
  std::set<std::string> tried;
  for (;;) {
    std::optional<QueuedStart> next;
    {
      absl::MutexLock lock(&mutex_);
      // The store was full at the last try, or holds back a change that
      // already happened: nothing can be recorded.
      if (clock_.monotonic() < next_start_try_ || !table_.Writable().ok()) return;
      next = NextStartLocked();
    }
    if (!next || !tried.insert(next->job.id()).second) return;
    // The job and the workers it would take: the same head with other
    // workers is planned anew.
    const std::string key =
        absl::StrCat(next->job.id(), " ", absl::StrJoin(next->workers, ","));
    planner_.Start(key, [this, job = next->job, workers = next->workers](
                            const std::function<bool()>& cancelled) {
      return LaunchFor(job, workers, cancelled);
    });
    std::optional<absl::StatusOr<Launch>> launch =
        planner_.Take(key, options_.plan_wait);
    absl::MutexLock lock(&mutex_);
    if (!launch) {
      // Still searching: the queue behind it waits (first in, first out).
      SayPendingLocked(next->job,
                       absl::StrCat("planning for ", next->workers.size(),
                                    " idle ", DeviceKindOf(next->job.manifest()),
                                    " workers"));
      return;
    }
    // Stopped, or its workers taken or lost, while it was planned.
    if (!StillStartableLocked(*next)) continue;
    if (!FinishStartLocked(*std::move(next), *std::move(launch))) return;
  }
}

std::optional<JobManager::QueuedStart> JobManager::NextStartLocked() {
  std::vector<Job> pending = table_.Live(chimera::v1::JOB_STATE_PENDING);
  if (pending.empty()) return std::nullopt;
  // First in, first out: the head of the queue waits for its workers.
  Job& head = pending.front();
  std::vector<std::string> chosen = IdleWorkersForLocked(head.manifest());
  if (chosen.empty()) {
    SayWhyPendingLocked(std::move(head));
    return std::nullopt;
  }
  return QueuedStart{std::move(head), std::move(chosen)};
}

bool JobManager::StillStartableLocked(const QueuedStart& start) const {
  absl::StatusOr<Job> job = table_.Get(start.job.id());
  return job.ok() && job->status().state() == chimera::v1::JOB_STATE_PENDING &&
         IdleWorkersForLocked(job->manifest()) == start.workers;
}

bool JobManager::FinishStartLocked(QueuedStart start,
                                   absl::StatusOr<Launch> launch) {
  const std::string id = start.job.id();
  const absl::Status started =
      launch.ok() ? StartLocked(std::move(start.job), start.workers,
                                *std::move(launch))
                  : launch.status();
  if (absl::IsResourceExhausted(started)) {
    // The store is full: the job stays queued, its workers free (none heard
    // of it), and starts are tried again after a growing pause.
    WithdrawRunLocked(id);
    start_backoff_ = std::min(std::max(2 * start_backoff_, kMinStartBackoff),
                              kMaxStartBackoff);
    next_start_try_ = clock_.monotonic() + start_backoff_;
    CHIMERA_LOG(ERROR) << "job " << id << " waits: " << started
                       << "; trying again in "
                       << absl::FormatDuration(start_backoff_);
    return false;
  }
  start_backoff_ = absl::ZeroDuration();
  if (!started.ok()) {
    const absl::Status ended = EndRunLocked(
        id, JobEvent::Failed(absl::StrCat("could not start: ", started.message())));
    if (!ended.ok()) CHIMERA_LOG(ERROR) << ended;
  }
  return true;
}

void JobManager::SayWhyPendingLocked(Job job) {
  const std::string device = DeviceKindOf(job.manifest());
  int registered = 0;
  int idle = 0;
  for (const chimera::v1::WorkerInfo& worker : workers_->List()) {
    if (worker.state() == chimera::v1::WORKER_STATE_DEAD ||
        !DeviceIndex(worker, device).has_value()) {
      continue;
    }
    ++registered;
    if (worker.state() == chimera::v1::WORKER_STATE_IDLE) ++idle;
  }
  const int needed = planner::MinimumWorkers(job.manifest());
  SayPendingLocked(std::move(job),
                   absl::StrCat("needs ", needed, " idle ", device, " worker",
                                needed == 1 ? "" : "s", " (", registered,
                                " registered, ", registered - idle, " busy)"));
}

void JobManager::SayPendingLocked(Job job, absl::string_view reason) {
  if (job.status().waiting_for() == reason) return;
  absl::StatusOr<Job> waiting = Transition(
      std::move(job), JobEvent::Waiting(std::string(reason)), clock_.wall());
  const absl::Status saved = waiting.ok() ? SaveLocked(*waiting) : waiting.status();
  if (!saved.ok()) CHIMERA_LOG(ERROR) << saved;
}

std::vector<std::string> JobManager::IdleWorkersForLocked(
    const chimera::v1::TrainJob& manifest) const {
  const std::string device = DeviceKindOf(manifest);
  std::vector<std::string> offering;
  for (const std::string& id : workers_->IdleWorkers()) {
    absl::StatusOr<chimera::v1::WorkerInfo> info = workers_->Get(id);
    if (info.ok() && DeviceIndex(*info, device).has_value()) offering.push_back(id);
  }
  offering.resize(planner::WorkersToUse(manifest, offering.size()));
  return offering;
}

absl::StatusOr<JobRun*> JobManager::RunForLocked(
    const std::string& job_id, std::optional<int> attempt, int rank,
    const std::string& worker_id) {
  auto it = runs_.find(job_id);
  if (it == runs_.end() || (attempt && it->second.attempt != *attempt) ||
      rank < 0 || rank >= static_cast<int>(it->second.worker_of_rank.size()) ||
      it->second.worker_of_rank[rank] != worker_id) {
    return absl::NotFoundError(
        absl::StrCat("no running task of job ", job_id,
                     attempt ? absl::StrCat(" attempt ", *attempt) : "",
                     " rank ", rank, " on worker ", worker_id));
  }
  return &it->second;
}

absl::Status JobManager::CheckStoreOnWorkerLocked(
    const chimera::v1::ReportTaskStateRequest& report) {
  ASSIGN_OR_RETURN(const chimera::v1::WorkerInfo worker,
                   workers_->Get(report.worker_id()));
  const absl::StatusOr<net::ServerAddress> store =
      net::ParseServerAddress(report.store_address());
  if (store.ok() && store->host == worker.host()) return absl::OkStatus();
  const std::string problem = absl::StrCat(
      "rank 0 on worker ", report.worker_id(), " reported its rendezvous store at '",
      report.store_address(), "', not on the host it registered ('", worker.host(), "')");
  RETURN_IF_ERROR(EndRunLocked(report.job_id(), JobEvent::Failed(problem)));
  return absl::InvalidArgumentError(problem);
}

absl::Status JobManager::OnTaskState(
    const chimera::v1::ReportTaskStateRequest& report) {
  RETURN_IF_ERROR(
      workers_->CheckIncarnation(report.worker_id(), report.incarnation()));
  absl::MutexLock lock(&mutex_);
  ASSIGN_OR_RETURN(JobRun* run, RunForLocked(report.job_id(), report.attempt(),
                                           report.rank(), report.worker_id()));
  switch (report.state()) {
    case chimera::v1::TASK_STATE_READY: {
      if (report.rank() != 0 || report.store_address().empty()) {
        return absl::InvalidArgumentError(
            "READY comes from rank 0 and carries the store address");
      }
      RETURN_IF_ERROR(CheckStoreOnWorkerLocked(report));
      RETURN_IF_ERROR(RecordFirstStepLocked(report.job_id(), report.first_step()));
      // Rank 0's own start went out when the run began.
      for (size_t rank = 1; rank < run->held_starts.size(); ++rank) {
        chimera::v1::Assignment& start = run->held_starts[rank];
        start.mutable_start()->mutable_rendezvous()->set_store_address(
            report.store_address());
        workers_->Send(run->worker_of_rank[rank], std::move(start));
      }
      run->held_starts.clear();
      run->rendezvous_done = true;
      run->last_progress.assign(run->worker_of_rank.size(), clock_.monotonic());
      return absl::OkStatus();
    }
    case chimera::v1::TASK_STATE_SUCCEEDED:
    case chimera::v1::TASK_STATE_FAILED:
    case chimera::v1::TASK_STATE_STOPPED:
      return RankEndedLocked(
          report.job_id(), run, report.rank(), report.worker_id(),
          {report.state(), report.message(), report.retryable()});
    default:
      return absl::InvalidArgumentError(
          "state must be READY, SUCCEEDED, FAILED or STOPPED");
  }
}

absl::Status JobManager::RankEndedLocked(const std::string& job_id, JobRun* run,
                                         int rank, const std::string& worker_id,
                                         const RankEnd& end) {
  run->rank_done[rank] = true;
  workers_->Release(worker_id);
  if (end.state == chimera::v1::TASK_STATE_SUCCEEDED) {
    if (absl::c_all_of(run->rank_done, [](bool done) { return done; })) {
      return EndRunLocked(job_id, JobEvent::Succeeded());
    }
    return absl::OkStatus();
  }
  const bool retryable =
      end.state == chimera::v1::TASK_STATE_FAILED && end.retryable;
  const bool first = !run->failure;
  if (!first && (retryable || !run->failure_retryable)) {
    return absl::OkStatus();
  }
  run->failure = absl::StrCat(
      "rank ", rank, " on worker ", worker_id,
      end.state == chimera::v1::TASK_STATE_STOPPED ? " stopped on its own"
                                                   : " failed",
      end.message.empty() ? "" : ": ",
      Utf8Prefix(end.message, kMaxTaskMessageBytes),
      end.message.size() > kMaxTaskMessageBytes
          ? absl::StrCat(" ... (cut to ", kMaxTaskMessageBytes, " bytes)")
          : "");
  run->failure_retryable = retryable;
  if (first) run->fail_by = clock_.monotonic() + workers_->policy().DeadAfter();
  return absl::OkStatus();
}

absl::Status JobManager::RecordFirstStepLocked(const std::string& job_id,
                                               int first_step) {
  ASSIGN_OR_RETURN(Job job, table_.Get(job_id));
  const int max_steps = job.manifest().spec().training().max_steps();
  if (first_step < 0 || first_step > max_steps) {
    return absl::InvalidArgumentError(absl::StrCat(
        "first_step: ", first_step, " is outside the job's steps [0, ",
        max_steps, "]"));
  }
  chimera::v1::JobStatus& status = *job.mutable_status();
  if (status.completed_steps() == first_step &&
      status.checkpoint_step() == first_step) {
    return absl::OkStatus();
  }
  CHIMERA_LOG(INFO) << "job " << job_id << " starts at step " << first_step
                    << ", its latest complete checkpoint on disk (the "
                       "coordinator had seen step "
                    << status.checkpoint_step() << ")";
  status.set_completed_steps(first_step);
  status.set_checkpoint_step(first_step);
  return SaveLocked(job);
}

absl::Status JobManager::OnMetrics(
    const chimera::v1::ReportMetricsRequest& report,
    chimera::v1::ReportMetricsResponse* response) {
  RETURN_IF_ERROR(
      workers_->CheckIncarnation(report.worker_id(), report.incarnation()));
  absl::MutexLock lock(&mutex_);
  // 0: a worker that predates the field; rank and worker must still match.
  const std::optional<int> attempt = report.attempt() == 0
                                         ? std::nullopt
                                         : std::optional<int>(report.attempt());
  ASSIGN_OR_RETURN(JobRun* run, RunForLocked(report.job_id(), attempt,
                                           report.rank(), report.worker_id()));
  const int step = report.metrics().step();
  if (step < 0 || step >= run->max_steps) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics.step: ", step, " is outside the job's steps [0, ",
                     run->max_steps, ")"));
  }
  run->last_progress[report.rank()] = clock_.monotonic();
  const std::optional<TraceCollector::Step>& recorded = run->traces.complete();
  if (response != nullptr) {
    response->set_record_timeline(
        trace_waits_.WantsTimelines(report.job_id(), recorded));
  }
  if (report.metrics().has_timeline() &&
      trace_waits_.Wanted(report.job_id(), step, recorded) &&
      run->traces.Add(step, report.rank(), report.metrics().timeline())) {
    ++version_;  // Wakes the waiting TraceJob calls.
  }
  std::optional<CompletedStep> done =
      run->steps.Add(report.rank(), report.metrics());
  if (!done) return absl::OkStatus();
  ASSIGN_OR_RETURN(Job job, table_.Get(report.job_id()));
  RecordStep(*done, run->worker_of_rank, clock_.wall(), &job);
  RETURN_IF_ERROR(table_.AppendStep(job.id(), job.status().last_step()));
  return SaveLocked(job);
}

absl::StatusOr<int> JobManager::BeginTrace(const std::string& id,
                                           std::optional<int> step) {
  absl::MutexLock lock(&mutex_);
  ASSIGN_OR_RETURN(Job job, table_.Get(id));
  const JobState state = job.status().state();
  if (IsTerminal(state)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " has ended (", JobStateName(state),
                     "); a trace is recorded only while it runs"));
  }
  const int steps = job.manifest().spec().training().max_steps();
  const int next = job.status().completed_steps();
  if (!step) step = next;
  if (*step < 0 || *step >= steps) {
    return absl::InvalidArgumentError(
        absl::StrCat("step: ", *step, " is not a step of job ", id,
                     " (it runs steps 0 to ", steps - 1, ")"));
  }
  auto run = runs_.find(id);
  const bool held = run != runs_.end() && run->second.traces.complete() &&
                    run->second.traces.complete()->step == *step;
  if (*step < next && !held) {
    return absl::InvalidArgumentError(
        absl::StrCat("step: job ", id, " has already run step ", *step,
                     " and holds no trace of it; ask for step ", next,
                     " or later, or leave the step out for the next one"));
  }
  trace_waits_.Add(id, *step);
  return *step;
}

absl::StatusOr<std::optional<chimera::v1::JobTrace>> JobManager::TraceOf(
    const std::string& id, int from_step) {
  absl::MutexLock lock(&mutex_);
  std::optional<chimera::v1::JobTrace> trace;
  auto run = runs_.find(id);
  if (run != runs_.end()) {
    ASSIGN_OR_RETURN(trace, CompleteTraceLocked(id, run->second));
  } else if (const chimera::v1::JobTrace* ended = trace_waits_.EndedTrace(id)) {
    trace = *ended;
  }
  if (trace && trace->step() >= from_step) return trace;
  if (run != runs_.end()) return std::nullopt;
  ASSIGN_OR_RETURN(Job job, table_.Get(id));
  const JobState state = job.status().state();
  if (IsTerminal(state)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", id, " ended (", JobStateName(state), ") before every rank ",
        "recorded step ", from_step, " or a later one"));
  }
  return std::nullopt;  // Pending: waits to start or restart.
}

absl::StatusOr<std::optional<chimera::v1::JobTrace>>
JobManager::CompleteTraceLocked(const std::string& id, const JobRun& run) {
  const std::optional<TraceCollector::Step>& step = run.traces.complete();
  if (!step) return std::nullopt;
  ASSIGN_OR_RETURN(Job job, table_.Get(id));
  chimera::v1::JobTrace trace;
  trace.set_job_id(id);
  trace.set_step(step->step);
  *trace.mutable_plan() = job.plan();
  for (size_t rank = 0; rank < step->ranks.size(); ++rank) {
    chimera::v1::RankTimeline* timeline = trace.add_ranks();
    timeline->set_rank(static_cast<int>(rank));
    timeline->set_worker_id(run.worker_of_rank[rank]);
    *timeline->mutable_timeline() = step->ranks[rank];
  }
  return trace;
}

void JobManager::EndTrace(const std::string& id, int from_step) {
  absl::MutexLock lock(&mutex_);
  if (!trace_waits_.Remove(id, from_step)) return;
  auto run = runs_.find(id);
  if (run != runs_.end()) run->second.traces.DropPartial();
}

uint64_t JobManager::version() const {
  absl::MutexLock lock(&mutex_);
  return version_;
}

uint64_t JobManager::WaitForChange(uint64_t seen, absl::Duration wait) const {
  absl::MutexLock lock(&mutex_);
  auto changed = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    return version_ != seen;
  };
  mutex_.AwaitWithTimeout(absl::Condition(&changed), wait);
  return version_;
}

void JobManager::WakeWaiters() {
  absl::MutexLock lock(&mutex_);
  ++version_;
}

}  // namespace chimera::coordinator
