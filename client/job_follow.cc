#include "client/job_follow.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/job_output.h"
#include "client/structured_output.h"
#include "common/progress_bar.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "planner/plan_evaluator.h"

namespace chimera::client {
namespace {

// "plan: chimera W=1 D=4 B=2 N=4 pipelines=2, predicted step 0.120 s, bubble
// 0.231, 66.7 samples/s"
std::string DescribeRunningPlan(const chimera::v1::Plan& plan) {
  std::string line = absl::StrCat("plan: ", planner::DescribePlan(plan));
  const chimera::v1::Prediction& predicted = plan.prediction();
  if (predicted.iteration_seconds() > 0) {
    absl::StrAppend(&line,
                    absl::StrFormat(", predicted step %.3f s, bubble %.3f, %.1f samples/s",
                                    predicted.iteration_seconds(), predicted.bubble_ratio(),
                                    predicted.samples_per_second()));
  }
  return line;
}

// The plan line of a job that has started (nothing if the coordinator
// cannot be asked: the steps follow all the same).
void AnnouncePlan(CoordinatorClient& client, const std::string& id, bool json) {
  const absl::StatusOr<chimera::v1::Job> job = client.Get(id);
  if (!job.ok() || job->plan().scheme().empty()) return;
  if (json) {
    std::cout << nlohmann::json({{"plan", ToJsonValue(job->plan())}}).dump() << "\n";
  } else {
    std::cout << DescribeRunningPlan(job->plan()) << "\n";
    if (const std::string note = AsynchronousNote(job->plan()); !note.empty()) {
      std::cout << note << "\n";
    }
  }
}

// Prints, in order, `status`'s recoveries that ended before `before` (Unix
// seconds) and after `*shown_until`, once each is complete: its next run
// trained.
void PrintRecoveries(const chimera::v1::JobStatus& status, double before,
                     double* shown_until) {
  for (const chimera::v1::JobRecovery& recovery : status.recoveries()) {
    if (recovery.time() <= *shown_until || recovery.time() >= before ||
        recovery.seconds_not_training() <= 0) {
      continue;
    }
    std::cout << FormatRecovery(recovery) << "\n";
    *shown_until = recovery.time();
  }
}

}  // namespace

absl::StatusOr<chimera::v1::JobState> FollowJob(CoordinatorClient& client,
                                                const std::string& id,
                                                const FollowOptions& options) {
  ASSIGN_OR_RETURN(const chimera::v1::Job job, client.Get(id));
  const int max_steps = job.manifest().spec().training().max_steps();
  const bool follow = options.follow;
  const bool json = options.json;
  const bool progress = follow && !json && isatty(STDERR_FILENO);
  // Steps are numbered from 0: the last `tail` of those done start here.
  const int first_step =
      options.tail ? job.status().completed_steps() - *options.tail : 0;
  chimera::v1::JobState state = job.status().state();
  // The latest status seen, for the recoveries between the steps.
  chimera::v1::JobStatus latest = job.status();
  double recoveries_shown_until = 0;
  bool printed_state = false;
  bool announced = !options.announce_plan;
  bool output_closed = false;
  absl::Status status = client.Watch(id, follow, [&](const chimera::v1::JobEvent& event) {
    if (event.has_step() && event.step().step() < first_step) return;
    if (progress) std::cerr << "\r\033[K";
    if (!announced && (event.has_step() ||
                       event.status().state() == chimera::v1::JOB_STATE_RUNNING)) {
      AnnouncePlan(client, id, json);
      announced = true;
    }
    if (json) {
      std::cout << ToJsonLine(event) << "\n";
    } else if (event.has_step()) {
      PrintRecoveries(latest, event.step().end_time(), &recoveries_shown_until);
      std::cout << FormatStep(event.step(), max_steps) << "\n";
    } else {
      if (!printed_state || event.status().state() != state) {
        // Status events also carry progress; a line is for a new state.
        std::cout << "state " << JobStateName(event.status().state())
                  << (event.status().message().empty() ? "" : ": ")
                  << event.status().message() << "\n";
        printed_state = true;
      }
      latest = event.status();
      PrintRecoveries(latest, std::numeric_limits<double>::infinity(),
                      &recoveries_shown_until);
    }
    std::cout.flush();
    if (!std::cout && options.on_output_closed && !output_closed) {
      output_closed = true;
      options.on_output_closed();
    }
    if (event.has_status()) state = event.status().state();
    if (progress && event.has_step()) {
      std::cerr << ProgressBar(event.step().step() + 1, max_steps, event.step().step_seconds());
    }
  });
  if (progress) std::cerr << "\r\033[K";
  RETURN_IF_ERROR(status);
  return state;
}

}  // namespace chimera::client
