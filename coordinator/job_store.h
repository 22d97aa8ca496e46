// JobStore: every job the coordinator knows, persisted in SQLite (WAL
// journal, synchronous writes) so a restarted coordinator loses nothing:
// each job's spec, status, plan and per-worker summaries as one row, and its
// per-step summaries as an append-only history.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<JobStore> store, JobStore::Open(path));
//   RETURN_IF_ERROR(store->Put(job));
//   ASSIGN_OR_RETURN(chimera::v1::Job loaded, store->Get(job.id()));
//
// Thread-safe: one connection guarded by a mutex.
#ifndef CHIMERA_COORDINATOR_JOB_STORE_H_
#define CHIMERA_COORDINATOR_JOB_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "chimera/v1/service.pb.h"

struct sqlite3;

namespace chimera::coordinator {

class JobStore {
 public:
  // Opens or creates the database at `path` (":memory:" for tests) and its
  // schema. INVALID_ARGUMENT for a database of a newer schema, INTERNAL when
  // SQLite fails (the message says why, e.g. a read-only directory).
  static absl::StatusOr<std::unique_ptr<JobStore>> Open(const std::string& path);
  ~JobStore();
  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  // Bounds the store to about `max_bytes` (0: no bound beyond the disk's):
  // its database file and write-ahead log together. The log may take a
  // quarter (at most SQLite's default of 1000 pages) and is checkpointed
  // into the database whenever it fills, then cut back; the database has
  // the rest, and below its present size it may not grow. One write's own
  // pages may overshoot the log's share until its checkpoint. A write it
  // cannot make for want of room, the disk's or this bound's, is
  // RESOURCE_EXHAUSTED.
  absl::Status LimitSize(int64_t max_bytes);

  // Inserts or replaces the job with this id, atomically.
  absl::Status Put(const chimera::v1::Job& job);
  // NOT_FOUND for an unknown id; DATA_LOSS naming the job when its row is
  // damaged: its blob is empty, does not parse, or holds another id.
  absl::StatusOr<chimera::v1::Job> Get(const std::string& id);
  // Oldest first; every job when `state` is JOB_STATE_UNSPECIFIED. A damaged
  // row (as for Get) is left out, with an ERROR log naming it.
  absl::StatusOr<std::vector<chimera::v1::Job>> List(chimera::v1::JobState state);
  // The PENDING and RUNNING jobs, oldest first, as List: a coordinator's
  // start reads these and not the ended jobs, however many there are.
  absl::StatusOr<std::vector<chimera::v1::Job>> ListLive();
  // A job with its place in submission order (increasing, never reused).
  struct Sequenced {
    int64_t seq = 0;
    chimera::v1::Job job;
  };
  // The next `limit` rows after the one at `after_seq` (0: from the first),
  // oldest first: their jobs (a damaged row is skipped as by List), the
  // last row's seq, and whether the table ended before `limit` rows.
  struct Chunk {
    std::vector<Sequenced> jobs;
    int64_t last_seq = 0;
    bool end = false;
  };
  absl::StatusOr<Chunk> ListAfter(int64_t after_seq, int limit);
  // One page of the jobs in `state` (any when UNSPECIFIED) submitted after
  // `after_seq` (0: from the first), oldest first: at most `max_jobs` of
  // them and, past the first, no more than `max_bytes` together;
  // `next_after_seq` is where the next page starts, 0 when this one holds
  // the last job.
  struct Page {
    std::vector<chimera::v1::Job> jobs;
    int64_t next_after_seq = 0;
  };
  absl::StatusOr<Page> ListPage(chimera::v1::JobState state, int64_t after_seq,
                                int max_jobs, int64_t max_bytes);
  // Removes the job and its history; NOT_FOUND for an unknown id.
  absl::Status Delete(const std::string& id);

  // Appends one step's summary to the job's history.
  absl::Status AppendStep(const std::string& id, const chimera::v1::StepSummary& step);
  // The job's history after step `after` (steps count from 0), in step
  // order.
  absl::StatusOr<std::vector<chimera::v1::StepSummary>> Steps(const std::string& id,
                                                              int after = -1);

 private:
  explicit JobStore(sqlite3* db) : db_(db) {}

  absl::Mutex mutex_;
  sqlite3* db_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_JOB_STORE_H_
