#include "coordinator/trace_waits.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "coordinator/job_states.h"

namespace chimera::coordinator {

absl::StatusOr<int> StepToTrace(const chimera::v1::Job& job,
                                std::optional<int> step,
                                std::optional<int> held) {
  const std::string& id = job.id();
  const chimera::v1::JobState state = job.status().state();
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
  if (*step < next && held != step) {
    return absl::InvalidArgumentError(
        absl::StrCat("step: job ", id, " has already run step ", *step,
                     " and holds no trace of it; ask for step ", next,
                     " or later, or leave the step out for the next one"));
  }
  return *step;
}

void TraceWaits::Add(const std::string& id, int from_step) {
  waits_[id].insert(from_step);
}

bool TraceWaits::WantsTimelines(
    const std::string& id,
    const std::optional<TraceCollector::Step>& recorded) const {
  const auto waits = waits_.find(id);
  return waits != waits_.end() &&
         (!recorded || recorded->step < *waits->second.rbegin());
}

bool TraceWaits::Wanted(const std::string& id, int step,
                        const std::optional<TraceCollector::Step>& recorded) const {
  return WantsTimelines(id, recorded) && step >= *waits_.at(id).begin();
}

void TraceWaits::RunEnded(const std::string& id, chimera::v1::JobTrace trace) {
  if (Waiting(id)) ended_[id] = std::move(trace);
}

const chimera::v1::JobTrace* TraceWaits::EndedTrace(const std::string& id) const {
  const auto ended = ended_.find(id);
  return ended == ended_.end() ? nullptr : &ended->second;
}

bool TraceWaits::Remove(const std::string& id, int from_step) {
  auto waits = waits_.find(id);
  if (waits == waits_.end()) return false;
  auto one = waits->second.find(from_step);
  if (one != waits->second.end()) waits->second.erase(one);
  if (!waits->second.empty()) return false;
  waits_.erase(waits);
  ended_.erase(id);
  return true;
}

}  // namespace chimera::coordinator
