// Who waits for a job's trace (TraceJob calls), and what they are owed: the
// first step each accepts, whether the job's ranks should record timelines,
// and the last complete trace of a run that ended while someone waited. Not
// thread-safe: the JobManager holds it under its lock.
//
//   TraceWaits waits;
//   waits.Add(id, /*from_step=*/12);
//   response->set_record_timeline(waits.Wanted(id, collector.complete()));
//   if (waits.Remove(id, 12)) collector.DropPartial();  // nobody waits now
#ifndef CHIMERA_COORDINATOR_TRACE_WAITS_H_
#define CHIMERA_COORDINATOR_TRACE_WAITS_H_

#include <map>
#include <optional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "chimera/v1/service.pb.h"
#include "coordinator/trace_collector.h"

namespace chimera::coordinator {

// The step a TraceJob of `job` waits for: `step`, or the job's next one when
// none. INVALID_ARGUMENT for a step that is not one of the job's, or one it
// already ran of which `held` (the step of its run's last complete trace,
// if any) is not; FAILED_PRECONDITION once the job ended.
absl::StatusOr<int> StepToTrace(const chimera::v1::Job& job,
                                std::optional<int> step,
                                std::optional<int> held);

class TraceWaits {
 public:
  // A TraceJob of job `id` waits for a step >= `from_step`.
  void Add(const std::string& id, int from_step);

  // Whether anyone waits for a trace of job `id`.
  bool Waiting(const std::string& id) const { return waits_.count(id) > 0; }

  // Whether the ranks of job `id` should record the timeline of `step`:
  // someone waits, `step` is one a waiter accepts, and the last complete
  // trace (`recorded`) is not yet of a step every waiter accepts. Recording
  // then stops, so that a waiter's step is not replaced before it reads it.
  bool Wanted(const std::string& id, int step,
              const std::optional<TraceCollector::Step>& recorded) const;

  // Whether anyone waiting for job `id` would want a timeline at all (the
  // worker's record_timeline hint).
  bool WantsTimelines(const std::string& id,
                      const std::optional<TraceCollector::Step>& recorded) const;

  // Job `id`'s run ended with `trace` its last complete one: kept for the
  // waiters, if any.
  void RunEnded(const std::string& id, chimera::v1::JobTrace trace);
  // The trace kept for job `id`'s waiters after its run ended; none if none.
  const chimera::v1::JobTrace* EndedTrace(const std::string& id) const;

  // Ends the wait for `from_step` of job `id`; true when nobody waits for
  // the job any more (its kept trace is dropped too).
  bool Remove(const std::string& id, int from_step);

 private:
  // Per job someone traces, the first step each waiting TraceJob accepts.
  std::map<std::string, std::multiset<int>> waits_;
  // The last complete trace of a run that ended while someone waited.
  std::map<std::string, chimera::v1::JobTrace> ended_;
};

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_TRACE_WAITS_H_
