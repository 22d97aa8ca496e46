// Facts about chimera::v1::JobState that the coordinator and its clients
// must agree on.
//
// Header-only, next to nothing but the generated proto, so that anything
// holding a JobState (the CLI included) can ask without linking more.
#ifndef CHIMERA_COORDINATOR_JOB_STATES_H_
#define CHIMERA_COORDINATOR_JOB_STATES_H_

#include <string>

#include "chimera/v1/job.pb.h"

namespace chimera::coordinator {

// "RUNNING", "SUCCEEDED", ...: the state's name without JOB_STATE_.
inline std::string JobStateName(chimera::v1::JobState state) {
  constexpr size_t kPrefix = sizeof("JOB_STATE_") - 1;
  const std::string name = chimera::v1::JobState_Name(state);
  return name.size() > kPrefix ? name.substr(kPrefix) : name;
}

// SUCCEEDED, FAILED and STOPPED: the job has ended and will never run again
// (it can only be deleted). PENDING and RUNNING jobs have not ended.
inline bool IsTerminal(chimera::v1::JobState state) {
  return state == chimera::v1::JOB_STATE_SUCCEEDED ||
         state == chimera::v1::JOB_STATE_FAILED ||
         state == chimera::v1::JOB_STATE_STOPPED;
}

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_JOB_STATES_H_
