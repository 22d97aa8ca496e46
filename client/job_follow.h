// Following a job: its step lines and state changes as they happen, with a
// progress bar and ETA on a terminal, or one JSON object per event.
#ifndef CHIMERA_CLIENT_JOB_FOLLOW_H_
#define CHIMERA_CLIENT_JOB_FOLLOW_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "chimera/v1/job.pb.h"
#include "client/coordinator_client.h"

namespace chimera::client {

struct FollowOptions {
  // Until the job ends, rather than until its current state is known.
  bool follow = false;
  // One JSON object per event instead of text lines.
  bool json = false;
  // Of the steps done when it starts, only the last `tail`.
  std::optional<int> tail;
  // Once the job runs, one line with the plan it runs and what it is
  // predicted to do (with json: {"plan": ...}), before the first step.
  bool announce_plan = false;
  // Called once if standard output is closed under it (a reader that went
  // away: SIGPIPE ignored, writes fail); the following goes on regardless.
  std::function<void()> on_output_closed;
};


// Prints the job's steps and state changes; returns the last state seen.
absl::StatusOr<chimera::v1::JobState> FollowJob(CoordinatorClient& client,
                                                const std::string& id,
                                                const FollowOptions& options);

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_JOB_FOLLOW_H_
