#include "coordinator/job_run.h"

#include <algorithm>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/utf8.h"

namespace chimera::coordinator {
namespace {

// " (in FORWARD chunk=0 stage=1 mb=2 of step 7 for 3.2 s; its process is
// stopped)": where a stalled rank's task is, as its daemon said.
std::string DescribePosition(const chimera::v1::TaskPosition& position) {
  const std::string op =
      position.op().empty()
          ? absl::StrCat("instruction ", position.instruction())
          : position.op();
  return absl::StrFormat(
      " (%s %s of step %d for %.1f s%s)",
      position.waits_for_peer() ? "waiting in" : "in", op, position.step(),
      position.op_seconds(),
      position.process_stopped() ? "; its process is stopped" : "");
}

// A rank that neither waits for a peer nor can run: the one the others
// wait for.
bool HoldsOthersUp(const chimera::v1::TaskPosition& position) {
  return position.process_stopped() || !position.waits_for_peer();
}

}  // namespace

JobRun JobRun::For(const chimera::v1::Job& job, const chimera::v1::Plan& plan,
                   int ranks, absl::Time now, absl::Time wall_now) {
  JobRun run;
  run.attempt = AttemptOf(job);
  run.traces = TraceCollector(ranks);
  run.steps = StepAggregator(ranks);
  run.stragglers = StragglerWatch(plan, ranks);
  run.started = now;
  run.rank_done.assign(ranks, false);
  run.last_progress.assign(ranks, now);
  run.stepped.assign(ranks, false);
  run.predicted_step = absl::Seconds(plan.prediction().iteration_seconds());
  run.max_steps = job.manifest().spec().training().max_steps();
  run.deadline_seconds =
      job.manifest().spec().run_policy().active_deadline_seconds();
  if (run.deadline_seconds > 0) {
    // Counted from the first start, a wall time, on the monotonic clock.
    const absl::Time first_start = absl::FromUnixMicros(
        static_cast<int64_t>(job.status().start_time() * 1e6));
    run.deadline =
        now + (first_start - wall_now) + absl::Seconds(run.deadline_seconds);
  }
  return run;
}

JobRun JobRun::Recovered(const chimera::v1::Job& job, int ranks, absl::Time now,
                         absl::Time wall_now, absl::Duration readopt_timeout) {
  JobRun run = For(job, job.plan(), ranks, now, wall_now);
  run.worker_of_rank.assign(ranks, "");
  run.rendezvous_done = true;
  run.readopt_by = now + readopt_timeout;
  return run;
}

bool JobRun::Runs(std::optional<int> task_attempt, int rank,
                  const std::string& worker) const {
  return (!task_attempt || *task_attempt == attempt) && rank >= 0 &&
         rank < static_cast<int>(worker_of_rank.size()) &&
         worker_of_rank[rank] == worker;
}

absl::Status JobRun::CheckStep(int step) const {
  if (step >= 0 && step < max_steps) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("metrics.step: ", step, " is outside the job's steps [0, ",
                   max_steps, ")"));
}

void JobRun::Stepped(int rank, absl::Time now) {
  last_progress[rank] = now;
  stepped[rank] = true;
}

bool JobRun::MayAdopt(int task_attempt, int rank) const {
  return readopt_by != absl::InfiniteFuture() && attempt == task_attempt &&
         rank >= 0 && rank < static_cast<int>(worker_of_rank.size()) &&
         worker_of_rank[rank].empty();
}

bool JobRun::Adopt(int rank, const std::string& worker) {
  worker_of_rank[rank] = worker;
  if (absl::c_any_of(worker_of_rank,
                     [](const std::string& w) { return w.empty(); })) {
    return false;
  }
  readopt_by = absl::InfiniteFuture();
  return true;
}

std::vector<std::pair<std::string, chimera::v1::Assignment>>
JobRun::ReleaseStarts(const std::string& store_address, absl::Time now) {
  std::vector<std::pair<std::string, chimera::v1::Assignment>> starts;
  for (size_t rank = 1; rank < held_starts.size(); ++rank) {
    chimera::v1::Assignment& start = held_starts[rank];
    start.mutable_start()->mutable_rendezvous()->set_store_address(
        store_address);
    starts.emplace_back(worker_of_rank[rank], std::move(start));
  }
  held_starts.clear();
  rendezvous_done = true;
  last_progress.assign(worker_of_rank.size(), now);
  return starts;
}

bool JobRun::RankEnded(int rank, const std::string& worker, const RankEnd& end,
                       absl::Time now, absl::Duration hold) {
  rank_done[rank] = true;
  if (end.state == chimera::v1::TASK_STATE_SUCCEEDED) {
    return absl::c_all_of(rank_done, [](bool done) { return done; });
  }
  const bool retryable =
      end.state == chimera::v1::TASK_STATE_FAILED && end.retryable;
  const bool first = !failure;
  if (!first && (retryable || !failure_retryable)) return false;
  failure = absl::StrCat(
      "rank ", rank, " on worker ", worker,
      end.state == chimera::v1::TASK_STATE_STOPPED ? " stopped on its own"
                                                   : " failed",
      end.message.empty() ? "" : ": ",
      Utf8Prefix(end.message, kMaxTaskMessageBytes),
      end.message.size() > kMaxTaskMessageBytes
          ? absl::StrCat(" ... (cut to ", kMaxTaskMessageBytes, " bytes)")
          : "");
  failure_retryable = retryable;
  if (first) fail_by = now + hold;
  return false;
}

std::vector<std::string> JobRun::PlacedWorkers() const {
  std::vector<std::string> placed;
  for (const std::string& worker : worker_of_rank) {
    if (!worker.empty()) placed.push_back(worker);
  }
  return placed;
}

std::vector<std::pair<std::string, chimera::v1::Assignment>> JobRun::StopOrders(
    const std::string& id) const {
  std::vector<std::pair<std::string, chimera::v1::Assignment>> stops;
  for (size_t rank = 0; rank < worker_of_rank.size(); ++rank) {
    if (worker_of_rank[rank].empty() || rank_done[rank]) continue;
    chimera::v1::Assignment stop;
    stop.mutable_stop()->set_job_id(id);
    stop.mutable_stop()->set_attempt(attempt);
    stops.emplace_back(worker_of_rank[rank], std::move(stop));
  }
  return stops;
}

std::optional<chimera::v1::JobTrace> JobRun::CompleteTrace(
    const std::string& id, const chimera::v1::Plan& plan) const {
  const std::optional<TraceCollector::Step>& step = traces.complete();
  if (!step) return std::nullopt;
  chimera::v1::JobTrace trace;
  trace.set_job_id(id);
  trace.set_step(step->step);
  *trace.mutable_plan() = plan;
  for (size_t rank = 0; rank < step->ranks.size(); ++rank) {
    chimera::v1::RankTimeline* timeline = trace.add_ranks();
    timeline->set_rank(static_cast<int>(rank));
    timeline->set_worker_id(worker_of_rank[rank]);
    *timeline->mutable_timeline() = step->ranks[rank];
  }
  return trace;
}

std::optional<RunVerdict> JobRun::Overdue(absl::Time now,
                                          const RunBounds& bounds,
                                          const WorkerLookup& workers) const {
  if (readopt_by != absl::InfiniteFuture()) return std::nullopt;
  if (failure && now >= fail_by) {
    return RunVerdict{
        *failure, failure_retryable, RecoveryCause::kTaskFailed, {}};
  }
  if (!rendezvous_done && now - started > bounds.rendezvous_timeout) {
    return RunVerdict{
        absl::StrCat("rank 0 did not report its rendezvous store within ",
                     absl::FormatDuration(bounds.rendezvous_timeout)),
        true,
        RecoveryCause::kRendezvous,
        {}};
  }
  if (now >= deadline) {
    return RunVerdict{absl::StrCat("still running ", deadline_seconds,
                                   " s after its start, its "
                                   "spec.runPolicy.activeDeadlineSeconds"),
                      false,
                      RecoveryCause::kTaskFailed,
                      {}};
  }
  if (!rendezvous_done) return std::nullopt;
  const absl::Duration bound =
      std::max(bounds.progress_timeout, kStallFactor * predicted_step);
  // A rank's first step of a run also connects it, builds its stages and
  // loads the checkpoint: it may take as long as the rendezvous.
  return Stalled(now, bound, std::max(bound, bounds.rendezvous_timeout),
                 workers);
}

std::optional<RunVerdict> JobRun::Stalled(absl::Time now, absl::Duration bound,
                                          absl::Duration first_bound,
                                          const WorkerLookup& workers) const {
  std::vector<std::string> stalled;
  std::vector<chimera::v1::WorkerIncarnation> hung;
  // Whether any rank went without progress for its bound, and whether those
  // that did were all before their first step.
  bool overdue = false;
  bool all_first = true;
  for (size_t rank = 0; rank < last_progress.size(); ++rank) {
    if (rank_done[rank]) continue;
    const absl::Duration allowed = stepped[rank] ? bound : first_bound;
    const bool late = now - last_progress[rank] > allowed;
    const std::string& worker = worker_of_rank[rank];
    const std::optional<chimera::v1::WorkerInfo> info = workers(worker);
    const bool known = info && info->has_task_position();
    // A stopped rank is named even before its own bound: it may have
    // finished a step later than the peers that now wait for it.
    if (!late && !(known && info->task_position().process_stopped())) {
      continue;
    }
    if (late) {
      overdue = true;
      all_first = all_first && !stepped[rank];
    }
    stalled.push_back(
        absl::StrCat("rank ", rank, " on worker ", worker,
                     known ? DescribePosition(info->task_position()) : ""));
    if (known && HoldsOthersUp(info->task_position())) {
      chimera::v1::WorkerIncarnation& held = hung.emplace_back();
      held.set_worker_id(worker);
      held.set_incarnation(info->incarnation());
    }
  }
  if (!overdue) return std::nullopt;
  std::vector<std::string> hung_ids;
  for (const auto& worker : hung) hung_ids.push_back(worker.worker_id());
  std::string reason = absl::StrCat(
      absl::StrJoin(stalled, ", "), " reported no step for ",
      absl::FormatDuration(all_first ? first_bound : bound),
      " (the larger of --progress-timeout and ", kStallFactor,
      " predicted steps",
      all_first ? ", or of --rendezvous-timeout before a run's first step" : "",
      "): stopped or hung");
  if (!hung_ids.empty()) {
    absl::StrAppend(&reason, "; the job leaves out worker",
                    hung_ids.size() == 1 ? " " : "s ",
                    absl::StrJoin(hung_ids, ", "), " from now on (until ",
                    hung_ids.size() == 1 ? "its daemon restarts)"
                                         : "each one's daemon restarts)");
  }
  return RunVerdict{std::move(reason), true, RecoveryCause::kStalled,
                    std::move(hung)};
}

std::optional<JobEvent> JobRun::Ending(absl::Time now, const RunBounds& bounds,
                                       const WorkerLookup& workers) const {
  if (std::optional<std::string> why = Unadopted(now, bounds.readopt_timeout)) {
    return JobEvent::RunLost(*std::move(why),
                             RecoveryCause::kCoordinatorRestart);
  }
  std::optional<RunVerdict> verdict = Overdue(now, bounds, workers);
  if (!verdict) return std::nullopt;
  return verdict->retryable
             ? JobEvent::RunLost(std::move(verdict->reason), verdict->cause,
                                 std::move(verdict->left_out_workers))
             : JobEvent::Failed(std::move(verdict->reason));
}

std::optional<std::string> JobRun::Unadopted(
    absl::Time now, absl::Duration readopt_timeout) const {
  if (now < readopt_by) return std::nullopt;
  std::vector<int> missing;
  for (size_t rank = 0; rank < worker_of_rank.size(); ++rank) {
    if (worker_of_rank[rank].empty()) missing.push_back(static_cast<int>(rank));
  }
  return absl::StrCat("the coordinator restarted and the worker",
                      missing.size() == 1 ? " of rank " : "s of ranks ",
                      absl::StrJoin(missing, ", "),
                      " did not register again within ",
                      absl::FormatDuration(readopt_timeout));
}

void JobRun::Excuse(absl::Duration stall) {
  for (absl::Time& progress : last_progress) progress += stall;
  started += stall;
  fail_by += stall;
  readopt_by += stall;
}

}  // namespace chimera::coordinator
