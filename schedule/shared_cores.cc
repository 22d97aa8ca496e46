#include "schedule/shared_cores.h"

#include <iterator>
#include <limits>

namespace chimera::schedule {

SharedCores::SharedCores(int nodes, int cores_per_node)
    : busy_(nodes), cores_per_node_(cores_per_node) {}

CoreSpan SharedCores::Run(int node, double ready, double work) {
  if (work <= 0) return {ready, ready};
  BusyCores& busy = busy_[node];
  std::vector<CoreSpan> pieces;
  for (double t = ready;;) {
    const auto next = busy.upper_bound(t);
    const double until = next == busy.end()
                             ? std::numeric_limits<double>::infinity()
                             : next->first;
    const int busy_now = next == busy.begin() ? 0 : std::prev(next)->second;
    if (busy_now < cores_per_node_) {
      // Ends by comparison, not by what is left of `work`, which rounding
      // may leave too small to move `t`.
      if (t + work <= until) {
        pieces.push_back({t, t + work});
        break;
      }
      pieces.push_back({t, until});
      work -= until - t;
    }
    t = until;
  }
  for (const CoreSpan& piece : pieces) Occupy(busy, piece);
  return {pieces.front().start, pieces.back().end};
}

int SharedCores::BusyAt(const BusyCores& busy, double t) {
  auto it = busy.upper_bound(t);
  return it == busy.begin() ? 0 : std::prev(it)->second;
}

void SharedCores::Occupy(BusyCores& busy, CoreSpan span) {
  const auto first = busy.emplace(span.start, BusyAt(busy, span.start)).first;
  const auto last = busy.emplace(span.end, BusyAt(busy, span.end)).first;
  for (auto it = first; it != last; ++it) ++it->second;
}

}  // namespace chimera::schedule
