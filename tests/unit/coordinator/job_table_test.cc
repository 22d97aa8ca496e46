#include "coordinator/job_table.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chimera::coordinator {
namespace {

using chimera::v1::Job;
using chimera::v1::JobState;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Job MakeJob(const std::string& id, JobState state,
            const std::string& message = "") {
  Job job;
  job.set_id(id);
  job.mutable_manifest()->mutable_metadata()->set_name(id);
  job.mutable_status()->set_state(state);
  job.mutable_status()->set_message(message);
  return job;
}

std::vector<std::string> Ids(const std::vector<Job>& jobs) {
  std::vector<std::string> ids;
  for (const Job& job : jobs) ids.push_back(job.id());
  return ids;
}

class JobTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = *JobStore::Open(":memory:");
    table_ = std::make_unique<JobTable>(store_.get());
    ASSERT_TRUE(table_->Load().ok());
  }

  JobState Shown(const std::string& id) { return table_->Get(id)->status().state(); }
  JobState Stored(const std::string& id) { return store_->Get(id)->status().state(); }

  // A write that needs pages the store no longer has once it is full.
  static std::string Long() { return std::string(64 * 1024, 'x'); }

  std::unique_ptr<JobStore> store_;
  std::unique_ptr<JobTable> table_;
};

TEST_F(JobTableTest, LoadHoldsTheLiveJobsInSubmissionOrder) {
  for (const Job& job : {MakeJob("a", chimera::v1::JOB_STATE_PENDING),
                         MakeJob("b", chimera::v1::JOB_STATE_RUNNING),
                         MakeJob("c", chimera::v1::JOB_STATE_SUCCEEDED),
                         MakeJob("d", chimera::v1::JOB_STATE_PENDING)}) {
    ASSERT_TRUE(store_->Put(job).ok());
  }
  JobTable table(store_.get());
  ASSERT_TRUE(table.Load().ok());
  EXPECT_THAT(Ids(table.Live(chimera::v1::JOB_STATE_PENDING)), ElementsAre("a", "d"));
  EXPECT_THAT(Ids(table.Live(chimera::v1::JOB_STATE_RUNNING)), ElementsAre("b"));
  // An ended job is read from the store.
  EXPECT_EQ(table.Get("c")->status().state(), chimera::v1::JOB_STATE_SUCCEEDED);
  EXPECT_TRUE(absl::IsNotFound(table.Get("e").status()));

  // A new job queues last; a job that runs and comes back (a restart) keeps
  // its place.
  ASSERT_TRUE(table.Put(MakeJob("e", chimera::v1::JOB_STATE_PENDING)).ok());
  ASSERT_TRUE(table.Put(MakeJob("a", chimera::v1::JOB_STATE_RUNNING)).ok());
  ASSERT_TRUE(table.Put(MakeJob("a", chimera::v1::JOB_STATE_PENDING)).ok());
  EXPECT_THAT(Ids(table.Live(chimera::v1::JOB_STATE_PENDING)), ElementsAre("a", "d", "e"));
  EXPECT_EQ(table.OldestLive(chimera::v1::JOB_STATE_PENDING)->id(), "a");
  EXPECT_EQ(table.OldestLive(chimera::v1::JOB_STATE_RUNNING)->id(), "b");
  EXPECT_EQ(table.OldestLive(chimera::v1::JOB_STATE_UNSPECIFIED), std::nullopt);
  // An ended job leaves the live ones and is what the store holds.
  ASSERT_TRUE(table.Put(MakeJob("d", chimera::v1::JOB_STATE_FAILED)).ok());
  EXPECT_THAT(Ids(table.Live(chimera::v1::JOB_STATE_PENDING)), ElementsAre("a", "e"));
  EXPECT_EQ(Stored("d"), chimera::v1::JOB_STATE_FAILED);
}

TEST_F(JobTableTest, ARequestTheStoreRefusesChangesNothingAndLeavesNoError) {
  ASSERT_TRUE(store_->LimitSize(1).ok());
  const absl::Status put =
      table_->Put(MakeJob("big", chimera::v1::JOB_STATE_PENDING, Long()));
  ASSERT_EQ(put.code(), absl::StatusCode::kResourceExhausted) << put;
  EXPECT_TRUE(absl::IsNotFound(table_->Get("big").status()));
  EXPECT_TRUE(table_->Live(chimera::v1::JOB_STATE_PENDING).empty());
  // The caller was told; nothing waits, so nothing is sticky.
  EXPECT_TRUE(table_->Writable().ok());
  ASSERT_TRUE(store_->LimitSize(0).ok());
  EXPECT_TRUE(table_->Put(MakeJob("big", chimera::v1::JOB_STATE_PENDING, Long())).ok());
  EXPECT_EQ(Shown("big"), chimera::v1::JOB_STATE_PENDING);
}

// The store fails (full) with a run's end to record, then recovers: the
// table shows nothing the store did not hold at any point, refuses every
// change meanwhile, and records the kept outcomes in order.
TEST_F(JobTableTest, AnOutcomeTheStoreRefusesIsKeptAndEveryChangeWaitsForIt) {
  ASSERT_TRUE(table_->Put(MakeJob("ran", chimera::v1::JOB_STATE_RUNNING)).ok());
  ASSERT_TRUE(table_->Put(MakeJob("queued", chimera::v1::JOB_STATE_PENDING)).ok());
  ASSERT_TRUE(store_->LimitSize(1).ok());

  const absl::Status end =
      table_->Record(MakeJob("ran", chimera::v1::JOB_STATE_FAILED, Long()));
  ASSERT_EQ(end.code(), absl::StatusCode::kResourceExhausted) << end;
  EXPECT_THAT(end.message(), HasSubstr("job ran FAILED"));
  EXPECT_EQ(Shown("ran"), chimera::v1::JOB_STATE_RUNNING);
  EXPECT_EQ(Stored("ran"), chimera::v1::JOB_STATE_RUNNING);
  EXPECT_THAT(Ids(table_->Live(chimera::v1::JOB_STATE_RUNNING)), ElementsAre("ran"));

  // Every change is refused with the sticky error, even one that would fit.
  const absl::Status put = table_->Put(MakeJob("queued", chimera::v1::JOB_STATE_RUNNING));
  EXPECT_EQ(put.code(), absl::StatusCode::kResourceExhausted) << put;
  EXPECT_THAT(put.message(), HasSubstr("has not recorded 1 job change"));
  EXPECT_EQ(table_->AppendStep("ran", {}).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(table_->Delete("ran").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Shown("queued"), chimera::v1::JOB_STATE_PENDING);
  // A second outcome queues behind the first.
  const absl::Status second =
      table_->Record(MakeJob("queued", chimera::v1::JOB_STATE_FAILED, "stopped"));
  EXPECT_THAT(second.message(), HasSubstr("has not recorded 2 job changes"));
  EXPECT_EQ(Shown("queued"), chimera::v1::JOB_STATE_PENDING);

  EXPECT_EQ(table_->Retry(), 0);  // Still full.
  EXPECT_EQ(Shown("ran"), chimera::v1::JOB_STATE_RUNNING);
  EXPECT_FALSE(table_->Writable().ok());

  ASSERT_TRUE(store_->LimitSize(0).ok());
  EXPECT_EQ(table_->Retry(), 2);
  EXPECT_TRUE(table_->Writable().ok());
  EXPECT_EQ(Shown("ran"), chimera::v1::JOB_STATE_FAILED);
  EXPECT_EQ(Stored("ran"), chimera::v1::JOB_STATE_FAILED);
  EXPECT_EQ(store_->Get("ran")->status().message(), Long());
  EXPECT_EQ(Stored("queued"), chimera::v1::JOB_STATE_FAILED);
  EXPECT_TRUE(table_->Live(chimera::v1::JOB_STATE_RUNNING).empty());
  EXPECT_TRUE(table_->Live(chimera::v1::JOB_STATE_PENDING).empty());
  EXPECT_TRUE(table_->Put(MakeJob("next", chimera::v1::JOB_STATE_PENDING)).ok());
}

}  // namespace
}  // namespace chimera::coordinator
