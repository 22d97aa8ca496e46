// A job's status keeps its latest recoveries: each entry is begun when a
// run ends and filled in by the next run's start, the checkpoint it finds
// and its first step; older entries give way past the bound.
#include "coordinator/recovery_history.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chimera::coordinator {
namespace {

const absl::Time kEnd = absl::FromUnixSeconds(1'800'000'000);

// A job running attempt 1 of `scheme` on `workers` workers, its latest
// complete checkpoint at step 8.
chimera::v1::Job Running(const std::string& scheme, int workers) {
  chimera::v1::Job job;
  job.mutable_status()->set_state(chimera::v1::JOB_STATE_RUNNING);
  job.mutable_status()->set_attempt(1);
  job.mutable_status()->set_checkpoint_step(8);
  chimera::v1::Plan& plan = *job.mutable_plan();
  plan.set_scheme(scheme);
  plan.set_width(1);
  plan.set_depth(workers);
  for (int rank = 0; rank < workers; ++rank) plan.add_placement();
  return job;
}

TEST(RecoveryHistoryTest,
     ARecoveryIsFilledInAsTheNextRunStartsResumesAndTrains) {
  chimera::v1::Job job = Running("chimera", 4);
  RecoveryBegan("stalled", "rank 1 on worker w1 ... stopped or hung", kEnd,
                &job);
  ASSERT_EQ(job.status().recoveries_size(), 1);
  const chimera::v1::JobRecovery& recovery = job.status().recoveries(0);
  EXPECT_EQ(recovery.cause(), "stalled");
  EXPECT_EQ(recovery.from_plan(), "chimera W=1 D=4 on 4 workers");
  EXPECT_EQ(recovery.to_plan(), "");
  EXPECT_EQ(recovery.attempt(), 2);
  EXPECT_EQ(recovery.checkpoint_step(), 8);
  EXPECT_EQ(recovery.seconds_not_training(), 0);

  // Steps of the run that ended change nothing.
  RecoveryTrained(kEnd + absl::Seconds(1), &job);
  EXPECT_EQ(job.status().recoveries(0).seconds_not_training(), 0);

  // The next run: attempt 2 on three workers, resuming at a later
  // checkpoint that was complete on disk.
  chimera::v1::Job next = Running("zb-h2", 3);
  *next.mutable_status()->mutable_recoveries() = job.status().recoveries();
  next.mutable_status()->set_attempt(2);
  RecoveryStarted(&next);
  RecoveryResumedAt(12, &next);
  RecoveryTrained(kEnd + absl::Seconds(5.5), &next);
  RecoveryTrained(kEnd + absl::Seconds(9), &next);
  const chimera::v1::JobRecovery& done = next.status().recoveries(0);
  EXPECT_EQ(done.to_plan(), "zb-h2 W=1 D=3 on 3 workers");
  EXPECT_EQ(done.checkpoint_step(), 12);
  EXPECT_DOUBLE_EQ(done.seconds_not_training(), 5.5)
      << "its first step ends it";
}

TEST(RecoveryHistoryTest, APlanIsSummarisedWithItsWorkers) {
  EXPECT_EQ(PlanSummary(Running("chimera", 4).plan()),
            "chimera W=1 D=4 on 4 workers");
  EXPECT_EQ(PlanSummary(Running("gpipe", 1).plan()),
            "gpipe W=1 D=1 on 1 worker");
}

TEST(RecoveryHistoryTest, OnlyTheLatestRecoveriesAreKept) {
  chimera::v1::Job job = Running("1f1b", 2);
  for (int i = 0; i < kMaxRecoveriesKept + 5; ++i) {
    RecoveryBegan("worker_lost", absl::StrCat("loss ", i), kEnd, &job);
  }
  ASSERT_EQ(job.status().recoveries_size(), kMaxRecoveriesKept);
  EXPECT_EQ(job.status().recoveries(0).reason(), "loss 5");
  EXPECT_EQ(job.status().recoveries(kMaxRecoveriesKept - 1).reason(),
            absl::StrCat("loss ", kMaxRecoveriesKept + 4));
}

}  // namespace
}  // namespace chimera::coordinator
