#include "coordinator/job_states.h"

#include "gtest/gtest.h"

namespace chimera::coordinator {
namespace {

TEST(JobStatesTest, PendingAndRunningJobsHaveNotEnded) {
  EXPECT_FALSE(IsTerminal(chimera::v1::JOB_STATE_UNSPECIFIED));
  EXPECT_FALSE(IsTerminal(chimera::v1::JOB_STATE_PENDING));
  EXPECT_FALSE(IsTerminal(chimera::v1::JOB_STATE_RUNNING));
}

TEST(JobStatesTest, SucceededFailedAndStoppedJobsHaveEnded) {
  EXPECT_TRUE(IsTerminal(chimera::v1::JOB_STATE_SUCCEEDED));
  EXPECT_TRUE(IsTerminal(chimera::v1::JOB_STATE_FAILED));
  EXPECT_TRUE(IsTerminal(chimera::v1::JOB_STATE_STOPPED));
}

TEST(JobStatesTest, EveryStateIsClassified) {
  // A state added to the proto must be placed in one of the tests above.
  EXPECT_EQ(chimera::v1::JobState_descriptor()->value_count(), 6);
}

}  // namespace
}  // namespace chimera::coordinator
