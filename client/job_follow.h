// Following a job: its step lines and state changes as they happen, with a
// progress bar and ETA on a terminal, or one JSON object per event.
#ifndef CHIMERA_CLIENT_JOB_FOLLOW_H_
#define CHIMERA_CLIENT_JOB_FOLLOW_H_

#include <string>

#include "absl/status/statusor.h"
#include "chimera/v1/job.pb.h"
#include "client/coordinator_client.h"

namespace chimera::client {

// Prints the job's steps and state changes until it ends (`follow`) or
// until its current state is known; returns the last state seen.
absl::StatusOr<chimera::v1::JobState> FollowJob(CoordinatorClient& client,
                                                const std::string& id, bool follow,
                                                bool json);

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_JOB_FOLLOW_H_
