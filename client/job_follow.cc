#include "client/job_follow.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "client/job_output.h"
#include "common/status_macros.h"

namespace chimera::client {

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
  bool printed_state = false;
  absl::Status status = client.Watch(id, follow, [&](const chimera::v1::JobEvent& event) {
    if (event.has_step() && event.step().step() < first_step) return;
    if (progress) std::cerr << "\r\033[K";
    if (json) {
      std::string line = ToJson(event);
      line.erase(std::remove(line.begin(), line.end(), '\n'), line.end());
      std::cout << line << "\n";
    } else if (event.has_step()) {
      std::cout << FormatStep(event.step(), max_steps) << "\n";
    } else if (!printed_state || event.status().state() != state) {
      // Status events also carry progress; a line is for a new state.
      std::cout << "state " << JobStateName(event.status().state())
                << (event.status().message().empty() ? "" : ": ")
                << event.status().message() << "\n";
      printed_state = true;
    }
    std::cout.flush();
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
