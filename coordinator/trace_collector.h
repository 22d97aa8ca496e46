// TraceCollector: the measured timelines of one run's ranks, gathered step
// by step while someone traces the job (TraceJob), into the latest step that
// every rank recorded.
//
//   TraceCollector traces(/*ranks=*/4);
//   traces.Add(step, rank, report.metrics().timeline());  // per report
//   if (traces.complete() && traces.complete()->step >= wanted) ...
//   traces.DropPartial();  // nobody waits any more
//
// Memory is bounded: a step older than the latest complete one is dropped,
// and at most kMaxPartialSteps steps are gathered at once (ranks of a
// synchronous job are never many steps apart).
#ifndef CHIMERA_COORDINATOR_TRACE_COLLECTOR_H_
#define CHIMERA_COORDINATOR_TRACE_COLLECTOR_H_

#include <map>
#include <optional>
#include <vector>

#include "chimera/v1/service.pb.h"

namespace chimera::coordinator {

class TraceCollector {
 public:
  static constexpr int kMaxPartialSteps = 4;

  // One step of every rank, indexed by rank.
  struct Step {
    int step = 0;
    std::vector<chimera::v1::StepTimeline> ranks;
  };

  explicit TraceCollector(int ranks) : ranks_(ranks) {}

  // Rank `rank`'s timeline of `step`; returns true when it completes the
  // step (which becomes complete()). Ranks outside [0, ranks) and steps not
  // after complete() are ignored.
  bool Add(int step, int rank, chimera::v1::StepTimeline timeline);

  // Forgets the steps not every rank has recorded; complete() stays.
  void DropPartial() { partial_.clear(); }

  // The latest step every rank recorded, if any.
  const std::optional<Step>& complete() const { return complete_; }

 private:
  int ranks_;
  // Per step, per rank.
  std::map<int, std::map<int, chimera::v1::StepTimeline>> partial_;
  std::optional<Step> complete_;
};

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_TRACE_COLLECTOR_H_
