// Recoveries are counted by cause from 0, and each is timed from its run's
// end to its job's next step, once.
#include "coordinator/recovery_stats.h"

#include "gtest/gtest.h"

namespace chimera::coordinator {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1000);

TEST(RecoveryStatsTest, EveryCauseIsCountedFromZero) {
  const RecoveryStats stats;
  for (RecoveryCause cause : kAllRecoveryCauses) {
    EXPECT_EQ(stats.counts().by_cause.at(cause), 0) << RecoveryCauseName(cause);
  }
  EXPECT_EQ(stats.counts().observed, 0);
}

TEST(RecoveryStatsTest, ARecoveryIsTimedUntilItsJobsNextStepOnce) {
  RecoveryStats stats;
  stats.Began("a", RecoveryCause::kWorkerLost, kStart);
  // Its restart failed too: counted for that cause as well, but the job was
  // kept from training once, from the first loss.
  stats.Began("a", RecoveryCause::kRendezvous, kStart + absl::Seconds(10));
  stats.Began("b", RecoveryCause::kGrow, kStart);
  stats.Trained("a", kStart + absl::Seconds(15));
  stats.Trained("a", kStart + absl::Seconds(16));
  stats.Forget("b");
  stats.Trained("b", kStart + absl::Seconds(1));

  const RecoveryCounts& counts = stats.counts();
  EXPECT_EQ(counts.by_cause.at(RecoveryCause::kWorkerLost), 1);
  EXPECT_EQ(counts.by_cause.at(RecoveryCause::kRendezvous), 1);
  EXPECT_EQ(counts.by_cause.at(RecoveryCause::kGrow), 1);
  EXPECT_EQ(counts.observed, 1);
  EXPECT_DOUBLE_EQ(counts.seconds, 15);
  for (size_t i = 0; i < kRecoveryBuckets.size(); ++i) {
    EXPECT_EQ(counts.at_most[i], kRecoveryBuckets[i] >= 15 ? 1 : 0)
        << kRecoveryBuckets[i];
  }
}

}  // namespace
}  // namespace chimera::coordinator
