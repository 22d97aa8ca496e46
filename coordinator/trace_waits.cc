#include "coordinator/trace_waits.h"

#include <utility>

namespace chimera::coordinator {

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
