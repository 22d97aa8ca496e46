#include "coordinator/job_manager.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <set>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "coordinator/job_states.h"
#include "jobspec/job_validator.h"
#include "jobspec/model_presets.h"
#include "net/server_address.h"
#include "planner/plan_params.h"
#include "schedule/params_proto.h"

namespace chimera::coordinator {

using chimera::v1::Job;
using chimera::v1::JobState;

JobManager::JobManager(JobStore* store, WorkerRegistry* workers,
                       JobManagerOptions options, Clock clock)
    : store_(store),
      workers_(workers),
      options_(std::move(options)),
      clock_(std::move(clock)),
      launcher_(workers, options_.launch),
      table_(store),
      workers_back_by_(clock_.monotonic() + options_.readopt_timeout +
                       workers->policy().DeadAfter()) {}

absl::Status JobManager::SaveLocked(const Job& job) {
  RETURN_IF_ERROR(table_.Put(job));
  ++version_;
  return absl::OkStatus();
}

absl::Status JobManager::Recover() {
  absl::MutexLock lock(&mutex_);
  RETURN_IF_ERROR(table_.Load());
  for (const Job& job : table_.Live(chimera::v1::JOB_STATE_RUNNING)) {
    const int ranks = schedule::PlanWorkerCount(job.plan());
    if (ranks <= 0) {
      const std::string cause =
          "the coordinator restarted and found the job without its plan";
      RETURN_IF_ERROR(EndRunLocked(
          job.id(),
          JobEvent::RunLost(cause, RecoveryCause::kCoordinatorRestart)));
      continue;
    }
    // Its workers go on training: it waits for them to register again.
    runs_[job.id()] =
        JobRun::Recovered(job, ranks, clock_.monotonic(), clock_.wall(),
                          options_.readopt_timeout);
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
  if (!run.MayAdopt(task.attempt(), rank)) return false;
  const bool running = task.state() == chimera::v1::TASK_STATE_RUNNING;
  if (running && !workers_->Assign(worker_id, {task.job_id(), run.attempt, rank},
                                   std::nullopt)
                      .ok()) {
    return false;
  }
  CHIMERA_LOG(INFO) << "job " << task.job_id() << ": rank " << rank
                    << " is back on worker " << worker_id;
  if (run.Adopt(rank, worker_id)) {
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

void JobManager::EndOverdueRunsLocked() {
  const RunBounds bounds{options_.rendezvous_timeout, options_.progress_timeout,
                         options_.readopt_timeout};
  const absl::Time now = clock_.monotonic();
  const WorkerLookup lookup = [this](const std::string& worker_id) {
    absl::StatusOr<chimera::v1::WorkerInfo> info = workers_->Get(worker_id);
    return info.ok() ? std::make_optional(*std::move(info)) : std::nullopt;
  };
  // Collected first: ending or restarting a run erases it from runs_.
  std::vector<std::pair<std::string, JobEvent>> ending;
  for (const auto& [id, run] : runs_) {
    if (std::optional<JobEvent> event = run.Ending(now, bounds, lookup)) {
      ending.emplace_back(id, *std::move(event));
    }
  }
  for (const auto& [id, event] : ending) {
    const absl::Status status = EndRunLocked(id, event);
    if (!status.ok()) CHIMERA_LOG(ERROR) << status;
  }
}

absl::StatusOr<Job> JobManager::Submit(
    const chimera::v1::TrainJob& submitted,
    const chimera::v1::ModelProfile& profile) {
  ASSIGN_OR_RETURN(const chimera::v1::TrainJob manifest,
                   jobspec::WithModelPreset(submitted));
  RETURN_IF_ERROR(
      jobspec::ValidateJob(manifest, chimera::jobspec::SpecOnly()).ToStatus());
  RETURN_IF_ERROR(ValidateJobProfile(manifest, profile));
  const int needed = manifest.spec().resources().workers();
  if (options_.max_workers > 0 && needed > options_.max_workers) {
    return absl::FailedPreconditionError(absl::StrCat(
        "spec.resources.workers: the job needs ", needed,
        " workers; this coordinator can have at most ", options_.max_workers));
  }
  const absl::Time deadline = clock_.monotonic() + kSubmitFitBudget;
  RETURN_IF_ERROR(launcher_.CheckFitsRegistered(
      manifest, profile,
      [this, deadline] { return clock_.monotonic() >= deadline; }));
  absl::MutexLock lock(&mutex_);
  Job job;
  absl::BitGen random;
  do {
    job.set_id(absl::StrFormat("%s-%08x", manifest.metadata().name(),
                               absl::Uniform<uint32_t>(random)));
  } while (!absl::IsNotFound(table_.Get(job.id()).status()));
  *job.mutable_manifest() = manifest;
  *job.mutable_profile() = profile;
  ASSIGN_OR_RETURN(job, Transition(std::move(job), JobEvent::Submitted(),
                                   clock_.wall()));
  RETURN_IF_ERROR(SaveLocked(job));
  CHIMERA_LOG(INFO) << "job " << job.id() << " submitted ("
                    << (needed > 0 ? absl::StrCat(needed) : "all idle")
                    << " workers)";
  return job;
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
  // The store holds what the table shows: it is read without the lock.
  return store_->ListPage(state, after_seq, max_jobs, max_bytes);
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

absl::StatusOr<std::vector<chimera::v1::Plan>> JobManager::Plans(
    const chimera::v1::TrainJob& submitted, int top_k,
    std::function<bool()> cancelled) {
  ASSIGN_OR_RETURN(const chimera::v1::TrainJob manifest,
                   jobspec::WithModelPreset(submitted));
  RETURN_IF_ERROR(
      jobspec::ValidateJob(manifest, chimera::jobspec::SpecOnly()).ToStatus());
  return launcher_.PlansOnRegistered(manifest, top_k, std::move(cancelled));
}

absl::Status JobManager::StartLocked(Job job,
                                     const std::vector<std::string>& chosen,
                                     Launch launch) {
  RETURN_IF_ERROR(launcher_.Place(chosen, job.manifest(), &launch.plan));
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
  const int asked = job.manifest().spec().resources().workers();
  CHIMERA_LOG(INFO) << "job " << job.id() << " started on " << chosen.size()
                    << " workers (" << plan.scheme() << " W=" << plan.width()
                    << " D=" << plan.depth() << ")"
                    << (static_cast<int>(chosen.size()) < asked
                            ? absl::StrCat(", re-planned: it asks for ", asked,
                                           " and no more are idle")
                            : "")
                    << " from step " << job.status().checkpoint_step();
  return absl::OkStatus();
}

absl::StatusOr<JobRun> JobManager::AssignTasksLocked(
    const Job& job, Launch launch, const std::vector<std::string>& chosen) {
  JobRun run = JobRun::For(job, job.plan(), static_cast<int>(chosen.size()),
                           clock_.monotonic(), clock_.wall());
  run.worker_of_rank = chosen;
  run.held_starts = launcher_.StartsFor(job, run.attempt, std::move(launch));
  RETURN_IF_ERROR(workers_->AssignRanks(chosen, job.id(), run.attempt));
  return run;
}

void JobManager::WithdrawRunLocked(const std::string& id) {
  auto it = runs_.find(id);
  if (it == runs_.end()) return;
  for (const std::string& worker : it->second.PlacedWorkers()) {
    workers_->Release(worker);
  }
  runs_.erase(it);
}

void JobManager::StopRunLocked(const std::string& id) {
  auto it = runs_.find(id);
  if (it == runs_.end()) return;
  const JobRun& run = it->second;
  // A step recorded just before the run ended still answers its TraceJob
  // (the job is read only then: every run's end comes here).
  if (trace_waits_.Waiting(id) && run.traces.complete()) {
    if (absl::StatusOr<Job> job = table_.Get(id); job.ok()) {
      trace_waits_.RunEnded(id, *run.CompleteTrace(id, job->plan()));
    }
  }
  for (auto& [worker, stop] : run.StopOrders(id)) {
    workers_->Send(worker, std::move(stop));
  }
  for (const std::string& worker : run.PlacedWorkers()) {
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
  // Queued again (a lost run, or one that grows) is a recovery.
  if (state == chimera::v1::JOB_STATE_PENDING) {
    recoveries_.Began(id, event.cause, clock_.monotonic());
    CHIMERA_LOG(WARNING) << "job " << id << ": " << message;
  } else {
    recoveries_.Forget(id);
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
  const absl::Status status = EndRunLocked(
      task.job_id, JobEvent::RunLost(message, RecoveryCause::kWorkerLost));
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
    EndOverdueRunsLocked();
  }
  StartQueuedJobs();
  PlanGrowth();
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
      return launcher_.LaunchFor(job.manifest(), job.profile(), workers,
                                 cancelled);
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
  // First in, first out: the head of the queue waits for its workers.
  std::optional<Job> head = table_.OldestLive(chimera::v1::JOB_STATE_PENDING);
  if (!head) return std::nullopt;
  std::vector<std::string> chosen = launcher_.IdleWorkersFor(*head);
  if (!chosen.empty()) return QueuedStart{*std::move(head), std::move(chosen)};
  std::optional<std::string> too_few;
  if (clock_.monotonic() >= workers_back_by_) {
    too_few = launcher_.TooFewLeft(*head);
  }
  if (too_few) {
    const absl::Status ended =
        EndRunLocked(head->id(), JobEvent::Failed(*too_few));
    if (!ended.ok()) CHIMERA_LOG(ERROR) << ended;
  } else {
    SayPendingLocked(*head, launcher_.WhyWaiting(*head));
  }
  return std::nullopt;
}

bool JobManager::StillStartableLocked(const QueuedStart& start) const {
  absl::StatusOr<Job> job = table_.Get(start.job.id());
  return job.ok() && job->status().state() == chimera::v1::JOB_STATE_PENDING &&
         launcher_.IdleWorkersFor(*job) == start.workers;
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

void JobManager::SayPendingLocked(Job job, absl::string_view reason) {
  if (job.status().waiting_for() == reason) return;
  absl::StatusOr<Job> waiting = Transition(
      std::move(job), JobEvent::Waiting(std::string(reason)), clock_.wall());
  const absl::Status saved = waiting.ok() ? SaveLocked(*waiting) : waiting.status();
  if (!saved.ok()) CHIMERA_LOG(ERROR) << saved;
}

absl::StatusOr<JobRun*> JobManager::RunForLocked(
    const std::string& job_id, std::optional<int> attempt, int rank,
    const std::string& worker_id) {
  auto it = runs_.find(job_id);
  if (it == runs_.end() || !it->second.Runs(attempt, rank, worker_id)) {
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
      for (auto& [worker, start] :
           run->ReleaseStarts(report.store_address(), clock_.monotonic())) {
        workers_->Send(worker, std::move(start));
      }
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
  workers_->Release(worker_id);
  if (run->RankEnded(rank, worker_id, end, clock_.monotonic(),
                     workers_->policy().DeadAfter())) {
    return EndRunLocked(job_id, JobEvent::Succeeded());
  }
  return absl::OkStatus();
}

absl::Status JobManager::RecordFirstStepLocked(const std::string& job_id,
                                               int first_step) {
  ASSIGN_OR_RETURN(Job job, table_.Get(job_id));
  const int64_t seen = job.status().checkpoint_step();
  ASSIGN_OR_RETURN(const bool changed, RecordFirstStep(first_step, &job));
  if (!changed) return absl::OkStatus();
  CHIMERA_LOG(INFO) << "job " << job_id << " starts at step " << first_step
                    << ", its latest complete checkpoint on disk (the "
                       "coordinator had seen step "
                    << seen << ")";
  return SaveLocked(job);
}

absl::Status JobManager::OnMetrics(
    const chimera::v1::ReportMetricsRequest& report,
    chimera::v1::ReportMetricsResponse* response) {
  RETURN_IF_ERROR(
      workers_->CheckIncarnation(report.worker_id(), report.incarnation()));
  absl::MutexLock lock(&mutex_);
  RETURN_IF_ERROR(OnStepLocked(report, report.metrics(), response));
  for (const chimera::v1::WorkerStepMetrics& later : report.later_metrics()) {
    RETURN_IF_ERROR(OnStepLocked(report, later, response));
  }
  return absl::OkStatus();
}

absl::Status JobManager::OnStepLocked(
    const chimera::v1::ReportMetricsRequest& report,
    const chimera::v1::WorkerStepMetrics& metrics,
    chimera::v1::ReportMetricsResponse* response) {
  // 0: a worker that predates the field; rank and worker must still match.
  const std::optional<int> attempt = report.attempt() == 0
                                         ? std::nullopt
                                         : std::optional<int>(report.attempt());
  ASSIGN_OR_RETURN(JobRun* run, RunForLocked(report.job_id(), attempt,
                                           report.rank(), report.worker_id()));
  const int step = metrics.step();
  RETURN_IF_ERROR(run->CheckStep(step));
  run->Stepped(report.rank(), clock_.monotonic());
  const std::optional<TraceCollector::Step>& recorded = run->traces.complete();
  if (response != nullptr) {
    response->set_record_timeline(
        trace_waits_.WantsTimelines(report.job_id(), recorded));
  }
  if (metrics.has_timeline() &&
      trace_waits_.Wanted(report.job_id(), step, recorded) &&
      run->traces.Add(step, report.rank(), metrics.timeline())) {
    ++version_;  // Wakes the waiting TraceJob calls.
  }
  std::optional<CompletedStep> done = run->steps.Add(report.rank(), metrics);
  if (!done) return absl::OkStatus();
  recoveries_.Trained(report.job_id(), clock_.monotonic());
  const std::vector<Straggler> stragglers = run->stragglers.Observe(*done);
  ASSIGN_OR_RETURN(Job job, table_.Get(report.job_id()));
  const int checkpoint = job.status().checkpoint_step();
  RecordStep(*done, run->worker_of_rank, clock_.wall(), &job);
  RecordStragglers(run->stragglers.current(), run->worker_of_rank, &job);
  RETURN_IF_ERROR(table_.AppendStep(job.id(), job.status().last_step()));
  RETURN_IF_ERROR(SaveLocked(job));
  ASSIGN_OR_RETURN(const bool replaced,
                   OnStragglersLocked(job, *run, stragglers));
  if (replaced || job.status().checkpoint_step() == checkpoint) {
    return absl::OkStatus();
  }
  return GrowAtCheckpointLocked(job, *run).status();
}

absl::StatusOr<bool> JobManager::OnStragglersLocked(
    const Job& job, const JobRun& run, const std::vector<Straggler>& found) {
  std::vector<std::string> reasons;
  for (const Straggler& straggler : found) {
    reasons.push_back(
        DescribeStraggler(straggler, run.worker_of_rank[straggler.rank]));
    CHIMERA_LOG(WARNING) << "job " << job.id() << ": " << reasons.back();
  }
  if (found.empty() ||
      !job.manifest().spec().run_policy().replace_stragglers()) {
    return false;
  }
  // Only a replacement needs the workers' incarnations.
  std::vector<chimera::v1::WorkerIncarnation> left_out;
  for (const Straggler& straggler : found) {
    const std::string& worker = run.worker_of_rank[straggler.rank];
    if (absl::StatusOr<chimera::v1::WorkerInfo> info = workers_->Get(worker);
        info.ok()) {
      left_out.emplace_back().set_worker_id(worker);
      left_out.back().set_incarnation(info->incarnation());
    }
  }
  RETURN_IF_ERROR(EndRunLocked(
      job.id(),
      JobEvent::RunLost(absl::StrCat(absl::StrJoin(reasons, "; "),
                                     "; the job leaves out its worker from "
                                     "now on (spec.runPolicy."
                                     "replaceStragglers)"),
                        RecoveryCause::kStraggler, std::move(left_out))));
  return true;
}

absl::StatusOr<int> JobManager::BeginTrace(const std::string& id,
                                           std::optional<int> step) {
  absl::MutexLock lock(&mutex_);
  ASSIGN_OR_RETURN(const Job job, table_.Get(id));
  std::optional<int> held;
  if (auto run = runs_.find(id);
      run != runs_.end() && run->second.traces.complete()) {
    held = run->second.traces.complete()->step;
  }
  ASSIGN_OR_RETURN(const int traced, StepToTrace(job, step, held));
  trace_waits_.Add(id, traced);
  return traced;
}

absl::StatusOr<std::optional<chimera::v1::JobTrace>> JobManager::TraceOf(
    const std::string& id, int from_step) {
  absl::MutexLock lock(&mutex_);
  std::optional<chimera::v1::JobTrace> trace;
  auto run = runs_.find(id);
  if (run != runs_.end()) {
    // Polled until a step is complete: the job is read only once there is.
    if (run->second.traces.complete()) {
      ASSIGN_OR_RETURN(const Job job, table_.Get(id));
      trace = run->second.CompleteTrace(id, job.plan());
    }
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

void JobManager::EndTrace(const std::string& id, int from_step) {
  absl::MutexLock lock(&mutex_);
  if (!trace_waits_.Remove(id, from_step)) return;
  auto run = runs_.find(id);
  if (run != runs_.end()) run->second.traces.DropPartial();
}

RecoveryCounts JobManager::Recoveries() const {
  absl::MutexLock lock(&mutex_);
  return recoveries_.counts();
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
