#include "coordinator/trace_collector.h"

#include <utility>

namespace chimera::coordinator {

bool TraceCollector::Add(int step, int rank,
                         chimera::v1::StepTimeline timeline) {
  if (rank < 0 || rank >= ranks_ || (complete_ && step <= complete_->step)) {
    return false;
  }
  auto& ranks = partial_[step];
  ranks[rank] = std::move(timeline);
  if (static_cast<int>(ranks.size()) < ranks_) {
    while (static_cast<int>(partial_.size()) > kMaxPartialSteps) {
      partial_.erase(partial_.begin());
    }
    return false;
  }
  Step done;
  done.step = step;
  for (auto& [r, recorded] : ranks) done.ranks.push_back(std::move(recorded));
  complete_ = std::move(done);
  partial_.erase(partial_.begin(), partial_.upper_bound(step));
  return true;
}

}  // namespace chimera::coordinator
