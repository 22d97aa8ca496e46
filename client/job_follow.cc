#include "client/job_follow.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "client/job_output.h"
#include "common/status_macros.h"

namespace chimera::client {

absl::StatusOr<chimera::v1::JobState> FollowJob(CoordinatorClient& client,
                                                const std::string& id, bool follow,
                                                bool json) {
  ASSIGN_OR_RETURN(const chimera::v1::Job job, client.Get(id));
  const int max_steps = job.manifest().spec().training().max_steps();
  const bool progress = follow && !json && isatty(STDERR_FILENO);
  chimera::v1::JobState state = job.status().state();
  bool printed_state = false;
  absl::Status status = client.Watch(id, follow, [&](const chimera::v1::JobEvent& event) {
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
