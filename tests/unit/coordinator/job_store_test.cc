#include "coordinator/job_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace chimera::coordinator {
namespace {

using ::testing::HasSubstr;

chimera::v1::Job MakeJob(const std::string& id, chimera::v1::JobState state) {
  chimera::v1::Job job;
  job.set_id(id);
  job.mutable_manifest()->mutable_metadata()->set_name(id);
  job.mutable_status()->set_state(state);
  return job;
}

// Bytes of `file`, 0 when there is none.
int64_t FileBytes(const std::string& file) {
  std::error_code missing;
  const uintmax_t bytes = std::filesystem::file_size(file, missing);
  return missing ? 0 : static_cast<int64_t>(bytes);
}

std::unique_ptr<JobStore> MustOpen(const std::string& path) {
  absl::StatusOr<std::unique_ptr<JobStore>> store = JobStore::Open(path);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

TEST(JobStoreTest, PutThenGetReturnsTheSameJob) {
  auto store = MustOpen(":memory:");
  chimera::v1::Job job = MakeJob("a", chimera::v1::JOB_STATE_PENDING);
  job.mutable_plan()->set_scheme("chimera");
  ASSERT_TRUE(store->Put(job).ok());
  absl::StatusOr<chimera::v1::Job> loaded = store->Get("a");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->SerializeAsString(), job.SerializeAsString());
}

TEST(JobStoreTest, UnknownJobIsNotFound) {
  auto store = MustOpen(":memory:");
  EXPECT_EQ(store->Get("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store->Delete("nope").code(), absl::StatusCode::kNotFound);
}

TEST(JobStoreTest, ListKeepsSubmissionOrderAcrossUpdatesAndFiltersByState) {
  auto store = MustOpen(":memory:");
  ASSERT_TRUE(store->Put(MakeJob("first", chimera::v1::JOB_STATE_PENDING)).ok());
  ASSERT_TRUE(store->Put(MakeJob("second", chimera::v1::JOB_STATE_PENDING)).ok());
  ASSERT_TRUE(store->Put(MakeJob("first", chimera::v1::JOB_STATE_RUNNING)).ok());
  auto all = store->List(chimera::v1::JOB_STATE_UNSPECIFIED);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].id(), "first");
  EXPECT_EQ((*all)[0].status().state(), chimera::v1::JOB_STATE_RUNNING);
  auto pending = store->List(chimera::v1::JOB_STATE_PENDING);
  ASSERT_TRUE(pending.ok());
  ASSERT_EQ(pending->size(), 1u);
  EXPECT_EQ((*pending)[0].id(), "second");
}

TEST(JobStoreTest, ListLiveReadsThePendingAndRunningJobsInSubmissionOrder) {
  auto store = MustOpen(":memory:");
  ASSERT_TRUE(store->Put(MakeJob("a", chimera::v1::JOB_STATE_RUNNING)).ok());
  ASSERT_TRUE(store->Put(MakeJob("b", chimera::v1::JOB_STATE_SUCCEEDED)).ok());
  ASSERT_TRUE(store->Put(MakeJob("c", chimera::v1::JOB_STATE_PENDING)).ok());
  ASSERT_TRUE(store->Put(MakeJob("d", chimera::v1::JOB_STATE_FAILED)).ok());
  ASSERT_TRUE(store->Put(MakeJob("e", chimera::v1::JOB_STATE_STOPPED)).ok());
  // Back in the queue, "a" keeps its place before "c".
  ASSERT_TRUE(store->Put(MakeJob("a", chimera::v1::JOB_STATE_PENDING)).ok());
  const absl::StatusOr<std::vector<chimera::v1::Job>> live = store->ListLive();
  ASSERT_TRUE(live.ok()) << live.status();
  ASSERT_EQ(live->size(), 2u);
  EXPECT_EQ((*live)[0].id(), "a");
  EXPECT_EQ((*live)[1].id(), "c");
}

TEST(JobStoreTest, ListAfterReadsInChunksFromWhereTheLastOneEnded) {
  auto store = MustOpen(":memory:");
  for (const char* id : {"a", "b", "c"}) {
    ASSERT_TRUE(store->Put(MakeJob(id, chimera::v1::JOB_STATE_PENDING)).ok());
  }
  absl::StatusOr<JobStore::Chunk> first = store->ListAfter(0, 2);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->jobs.size(), 2u);
  EXPECT_EQ(first->jobs[1].job.id(), "b");
  EXPECT_EQ(first->last_seq, first->jobs[1].seq);
  EXPECT_FALSE(first->end);
  absl::StatusOr<JobStore::Chunk> rest = store->ListAfter(first->last_seq, 2);
  ASSERT_TRUE(rest.ok()) << rest.status();
  ASSERT_EQ(rest->jobs.size(), 1u);
  EXPECT_EQ(rest->jobs[0].job.id(), "c");
  EXPECT_TRUE(rest->end);
}

TEST(JobStoreTest, StepsComeBackInStepOrderAndGoWithTheJob) {
  auto store = MustOpen(":memory:");
  ASSERT_TRUE(store->Put(MakeJob("a", chimera::v1::JOB_STATE_RUNNING)).ok());
  for (int step : {2, 1, 3}) {
    chimera::v1::StepSummary summary;
    summary.set_step(step);
    summary.set_loss(10.0 - step);
    ASSERT_TRUE(store->AppendStep("a", summary).ok());
  }
  auto steps = store->Steps("a");
  ASSERT_TRUE(steps.ok());
  ASSERT_EQ(steps->size(), 3u);
  EXPECT_EQ((*steps)[0].step(), 1);
  EXPECT_DOUBLE_EQ((*steps)[2].loss(), 7.0);
  auto after_first = store->Steps("a", 1);
  ASSERT_TRUE(after_first.ok());
  ASSERT_EQ(after_first->size(), 2u) << "what a follower that saw step 1 still needs";
  EXPECT_EQ((*after_first)[0].step(), 2);
  ASSERT_TRUE(store->Delete("a").ok());
  EXPECT_TRUE(store->Steps("a")->empty());
}

// Under --db-max-bytes 65536 the write-ahead log reached 4.1 MB: a full
// store goes on updating its jobs, every update lands in the log, and SQLite
// checkpointed it every 1000 pages and never cut it back. The database and
// its log together now stay within the limit, give or take one write.
TEST(JobStoreTest, DatabaseAndWriteAheadLogStayWithinTheSizeLimit) {
  constexpr int64_t kMaxBytes = 64 << 10;
  // SQLite's default page, with its WAL frame header; a write here changes
  // at most this many pages (a row, its id's index entry, the sequence,
  // and a split).
  constexpr int64_t kFrameBytes = 4096 + 24;
  constexpr int64_t kPagesPerWrite = 4;
  chimera::testing::TempDir dir;
  const std::string path = dir.path() + "/jobs.db";
  auto store = MustOpen(path);
  ASSERT_TRUE(store->LimitSize(kMaxBytes).ok());
  int64_t most_wal = 0;
  int64_t most_total = 0;
  const auto measure = [&] {
    const int64_t wal = FileBytes(path + "-wal");
    most_wal = std::max(most_wal, wal);
    most_total = std::max(most_total, FileBytes(path) + wal);
  };

  std::vector<std::string> ids;
  absl::Status put;
  while (put.ok() && ids.size() < 1000) {
    chimera::v1::Job job = MakeJob(absl::StrCat("job-", ids.size()),
                                   chimera::v1::JOB_STATE_PENDING);
    job.mutable_status()->set_message(std::string(300, '.'));
    put = store->Put(job);
    if (put.ok()) ids.push_back(job.id());
    measure();
  }
  ASSERT_EQ(put.code(), absl::StatusCode::kResourceExhausted) << put;
  ASSERT_FALSE(ids.empty());
  for (int update = 0; update < 300; ++update) {
    chimera::v1::Job job =
        MakeJob(ids[update % ids.size()], chimera::v1::JOB_STATE_RUNNING);
    job.mutable_status()->set_message(std::string(300, 'a' + update % 26));
    ASSERT_TRUE(store->Put(job).ok()) << update;
    measure();
  }
  EXPECT_LE(most_wal, kMaxBytes / 4 + kPagesPerWrite * kFrameBytes);
  EXPECT_LE(most_total, kMaxBytes + kPagesPerWrite * kFrameBytes);
}

TEST(JobStoreTest, JobsSurviveReopeningTheFile) {
  chimera::testing::TempDir dir;
  const std::string path = dir.path() + "/jobs.db";
  {
    auto store = MustOpen(path);
    ASSERT_TRUE(store->Put(MakeJob("kept", chimera::v1::JOB_STATE_SUCCEEDED)).ok());
  }
  auto reopened = MustOpen(path);
  absl::StatusOr<chimera::v1::Job> job = reopened->Get("kept");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->status().state(), chimera::v1::JOB_STATE_SUCCEEDED);
}

TEST(JobStoreTest, RefusesADatabaseFromANewerCoordinator) {
  chimera::testing::TempDir dir;
  const std::string path = dir.path() + "/future.db";
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version=99", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  absl::StatusOr<std::unique_ptr<JobStore>> store = JobStore::Open(path);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(store.status().message(), HasSubstr("schema version 99"));
}

TEST(JobStoreTest, UnwritableLocationIsAClearError) {
  absl::StatusOr<std::unique_ptr<JobStore>> store =
      JobStore::Open("/nonexistent-dir/jobs.db");
  EXPECT_FALSE(store.ok());
  EXPECT_THAT(store.status().message(), HasSubstr("/nonexistent-dir/jobs.db"));
}

TEST(JobStoreTest, ACorruptRowIsSkippedByListAndNamedByGet) {
  chimera::testing::TempDir dir;
  const std::string path = dir.path() + "/jobs.db";
  {
    auto store = MustOpen(path);
    ASSERT_TRUE(
        store->Put(MakeJob("good", chimera::v1::JOB_STATE_SUCCEEDED)).ok());
    ASSERT_TRUE(store->Put(MakeJob("bad", chimera::v1::JOB_STATE_FAILED)).ok());
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(db, "UPDATE jobs SET job = x'ffffffff' WHERE id = 'bad'",
                   nullptr, nullptr, nullptr),
      SQLITE_OK);
  sqlite3_close(db);

  auto store = MustOpen(path);
  absl::StatusOr<std::vector<chimera::v1::Job>> jobs =
      store->List(chimera::v1::JOB_STATE_UNSPECIFIED);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].id(), "good");
  absl::StatusOr<chimera::v1::Job> bad = store->Get("bad");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(bad.status().message(), HasSubstr("job 'bad'"));
}

// An empty blob parses as a job with no id and no state: it was listed to
// clients as an id-less UNSPECIFIED job. It is damaged, as is a row holding
// another job's id, and is skipped with an ERROR naming its row.
TEST(JobStoreTest, AnEmptyOrMisfiledRowIsSkippedWithAnErrorAndNamedByGet) {
  chimera::testing::TempDir dir;
  const std::string path = dir.path() + "/jobs.db";
  {
    auto store = MustOpen(path);
    for (const char* id : {"good", "empty", "misfiled"}) {
      ASSERT_TRUE(store->Put(MakeJob(id, chimera::v1::JOB_STATE_PENDING)).ok());
    }
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "UPDATE jobs SET job = x'' WHERE id = 'empty';"
                         "UPDATE jobs SET job = (SELECT job FROM jobs WHERE "
                         "id = 'good') WHERE id = 'misfiled'",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);

  auto store = MustOpen(path);
  ::testing::internal::CaptureStderr();
  absl::StatusOr<std::vector<chimera::v1::Job>> jobs =
      store->List(chimera::v1::JOB_STATE_UNSPECIFIED);
  absl::StatusOr<JobStore::Chunk> chunk = store->ListAfter(0, 10);
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].id(), "good");
  ASSERT_TRUE(chunk.ok()) << chunk.status();
  ASSERT_EQ(chunk->jobs.size(), 1u);
  EXPECT_EQ(chunk->jobs[0].job.id(), "good");
  EXPECT_TRUE(chunk->end);
  EXPECT_THAT(log, HasSubstr("skipping row 2: stored job 'empty' is empty"));
  EXPECT_THAT(log, HasSubstr("skipping row 3: stored job 'misfiled' holds a "
                             "job whose id is 'good'"));
  absl::StatusOr<chimera::v1::Job> empty = store->Get("empty");
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(empty.status().message(), HasSubstr("job 'empty' is empty"));
  EXPECT_EQ(store->Get("misfiled").status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(JobStoreTest, ASecondStoreOnTheSameFileIsRefusedWhileTheFirstIsOpen) {
  chimera::testing::TempDir dir;
  const std::string path = dir.path() + "/jobs.db";
  auto first = MustOpen(path);
  absl::StatusOr<std::unique_ptr<JobStore>> second = JobStore::Open(path);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(
      second.status().message(),
      HasSubstr("job store '" + path + "': another coordinator holds it"));
  first.reset();
  EXPECT_TRUE(JobStore::Open(path).ok());
}

TEST(JobStoreTest, AFileThatIsNoDatabaseIsAClearError) {
  chimera::testing::TempDir dir;
  const std::string path =
      dir.WriteFile("random.db", std::string(4096, '\x5a'));
  absl::StatusOr<std::unique_ptr<JobStore>> store = JobStore::Open(path);
  EXPECT_FALSE(store.ok());
  EXPECT_THAT(store.status().message(), HasSubstr("job store '" + path + "'"));
  EXPECT_THAT(store.status().message(), HasSubstr("not a database"));
}

}  // namespace
}  // namespace chimera::coordinator
