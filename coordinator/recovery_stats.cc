#include "coordinator/recovery_stats.h"

namespace chimera::coordinator {

RecoveryStats::RecoveryStats() {
  for (RecoveryCause cause : kAllRecoveryCauses) counts_.by_cause[cause] = 0;
}

void RecoveryStats::Began(const std::string& id, RecoveryCause cause,
                          absl::Time now) {
  ++counts_.by_cause[cause];
  // A recovery that failed to start is one: timed from its first loss.
  since_.emplace(id, now);
}

void RecoveryStats::Trained(const std::string& id, absl::Time now) {
  auto it = since_.find(id);
  if (it == since_.end()) return;
  const double seconds = absl::ToDoubleSeconds(now - it->second);
  since_.erase(it);
  ++counts_.observed;
  counts_.seconds += seconds;
  for (size_t i = 0; i < kRecoveryBuckets.size(); ++i) {
    if (seconds <= kRecoveryBuckets[i]) ++counts_.at_most[i];
  }
}

void RecoveryStats::Forget(const std::string& id) { since_.erase(id); }

}  // namespace chimera::coordinator
