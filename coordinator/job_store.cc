#include "coordinator/job_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace chimera::coordinator {
namespace {

// Bumped whenever the schema changes; older databases are migrated by Open.
constexpr int kSchemaVersion = 1;
// How long a statement waits for another connection's lock (a second
// coordinator on the same file, say) before it fails.
constexpr int kBusyTimeoutMs = 5000;
// SQLite's defaults: the write-ahead log is checkpointed into the database
// once it holds this many pages, and is never truncated.
constexpr int64_t kDefaultWalCheckpointPages = 1000;
constexpr int64_t kNoJournalSizeLimit = -1;
// SQLite's own default page limit, about 4 G pages: no limit.
constexpr int64_t kNoPageLimit = 4294967294;
// Under a size limit, the share of it the write-ahead log may take (and at
// most SQLite's default): every write lands in the log first, and a store at
// its limit keeps updating jobs, so an unbounded log grew 60 times past the
// limit before the first checkpoint.
constexpr int64_t kWalShareDivisor = 4;
// Bytes a WAL frame adds to the page it holds.
constexpr int64_t kWalFrameHeaderBytes = 24;

constexpr char kSchema[] = R"sql(
  CREATE TABLE IF NOT EXISTS jobs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    state INTEGER NOT NULL,
    job BLOB NOT NULL
  );
  CREATE TABLE IF NOT EXISTS steps (
    job_id TEXT NOT NULL,
    step INTEGER NOT NULL,
    summary BLOB NOT NULL,
    PRIMARY KEY (job_id, step)
  );
)sql";

// A full store (its disk, or its --db-max-bytes) is RESOURCE_EXHAUSTED: the
// coordinator retries what it must record, and a client may retry later.
absl::Status SqliteError(sqlite3* db, absl::string_view what) {
  const std::string message = absl::StrCat(what, ": ", sqlite3_errmsg(db));
  return sqlite3_errcode(db) == SQLITE_FULL ? absl::ResourceExhaustedError(message)
                                            : absl::InternalError(message);
}

// A prepared statement, finalized when it goes out of scope.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    status_ = sqlite3_prepare_v2(db, sql, -1, &statement_, nullptr) == SQLITE_OK
                  ? absl::OkStatus()
                  : SqliteError(db, "preparing a statement");
  }
  ~Statement() { sqlite3_finalize(statement_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  const absl::Status& status() const { return status_; }
  void Bind(int index, const std::string& text) {
    sqlite3_bind_text(statement_, index, text.data(), static_cast<int>(text.size()),
                      SQLITE_TRANSIENT);
  }
  void BindBlob(int index, const std::string& bytes) {
    sqlite3_bind_blob(statement_, index, bytes.data(), static_cast<int>(bytes.size()),
                      SQLITE_TRANSIENT);
  }
  void Bind(int index, int64_t value) { sqlite3_bind_int64(statement_, index, value); }

  // True while there is a row; an error status when stepping fails.
  absl::StatusOr<bool> Step() {
    const int rc = sqlite3_step(statement_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return SqliteError(db_, "running a statement");
  }
  int64_t Int(int column) { return sqlite3_column_int64(statement_, column); }
  std::string Text(int column) { return Blob(column); }
  std::string Blob(int column) {
    const void* data = sqlite3_column_blob(statement_, column);
    return std::string(static_cast<const char*>(data),
                       static_cast<size_t>(sqlite3_column_bytes(statement_, column)));
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* statement_ = nullptr;
  absl::Status status_;
};

absl::Status Execute(sqlite3* db, const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    absl::Status status = absl::InternalError(absl::StrCat("'", sql, "': ", error));
    sqlite3_free(error);
    return status;
  }
  return absl::OkStatus();
}

template <typename Message>
absl::StatusOr<Message> Decode(const std::string& bytes, absl::string_view what) {
  Message message;
  if (!message.ParseFromString(bytes)) {
    return absl::DataLossError(absl::StrCat("stored ", what, " is corrupt"));
  }
  return message;
}

// The job in the row of `id`. An empty blob parses as a job with no id and
// no state, which clients would be shown as such: it is as damaged as one
// that does not parse, and so is one that holds another job's id.
absl::StatusOr<chimera::v1::Job> RowJob(const std::string& id,
                                        const std::string& bytes) {
  const std::string what = absl::StrCat("job '", id, "'");
  if (bytes.empty()) {
    return absl::DataLossError(absl::StrCat("stored ", what, " is empty"));
  }
  ASSIGN_OR_RETURN(chimera::v1::Job job, Decode<chimera::v1::Job>(bytes, what));
  if (job.id() != id) {
    return absl::DataLossError(absl::StrCat(
        "stored ", what, " holds a job whose id is '", job.id(), "'"));
  }
  return job;
}

// A listed row's job; none for a damaged row, which must not hide every
// other job (Get names it to whoever asks for it).
std::optional<chimera::v1::Job> ListedJob(int64_t seq, const std::string& id,
                                          const std::string& bytes) {
  absl::StatusOr<chimera::v1::Job> job = RowJob(id, bytes);
  if (job.ok()) return *std::move(job);
  CHIMERA_LOG(ERROR) << "job store: skipping row " << seq << ": "
                     << job.status().message();
  return std::nullopt;
}

// Every job `list` (selecting seq, id, job) yields, as ListedJob.
absl::StatusOr<std::vector<chimera::v1::Job>> ListedJobs(Statement& list) {
  std::vector<chimera::v1::Job> jobs;
  while (true) {
    ASSIGN_OR_RETURN(bool row, list.Step());
    if (!row) return jobs;
    std::optional<chimera::v1::Job> job =
        ListedJob(list.Int(0), list.Text(1), list.Blob(2));
    if (job) jobs.push_back(*std::move(job));
  }
}

// Holds the store's file locked for as long as it is open, so that a second
// coordinator on the same file fails at start instead of both writing jobs.
absl::Status LockAgainstOtherCoordinators(sqlite3* db) {
  RETURN_IF_ERROR(Execute(db, "PRAGMA locking_mode=EXCLUSIVE"));
  // Fails once the busy timeout has passed while another holds the file; in
  // exclusive locking mode the first write then keeps the lock for good.
  if (sqlite3_exec(db, "BEGIN EXCLUSIVE; COMMIT", nullptr, nullptr, nullptr) !=
      SQLITE_OK) {
    if (sqlite3_errcode(db) == SQLITE_BUSY) {
      return absl::FailedPreconditionError(
          "another coordinator holds it (one store, one coordinator)");
    }
    return SqliteError(db, "locking");
  }
  return absl::OkStatus();
}

// Locks a freshly opened store, checks its schema version and brings it up
// to date.
absl::Status Prepare(sqlite3* db) {
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  RETURN_IF_ERROR(LockAgainstOtherCoordinators(db));
  // WAL keeps readers and the writer from blocking each other; FULL sync
  // makes every committed job survive a crash of the machine too.
  RETURN_IF_ERROR(Execute(db, "PRAGMA journal_mode=WAL"));
  RETURN_IF_ERROR(Execute(db, "PRAGMA synchronous=FULL"));
  Statement version(db, "PRAGMA user_version");
  RETURN_IF_ERROR(version.status());
  ASSIGN_OR_RETURN(bool has_row, version.Step());
  const int64_t found = has_row ? version.Int(0) : 0;
  if (found > kSchemaVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("it has schema version ", found,
                     "; this coordinator understands up to ", kSchemaVersion));
  }
  RETURN_IF_ERROR(Execute(db, kSchema));
  return Execute(db,
                 absl::StrCat("PRAGMA user_version=", kSchemaVersion).c_str());
}

}  // namespace

absl::StatusOr<std::unique_ptr<JobStore>> JobStore::Open(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                      nullptr) != SQLITE_OK) {
    absl::Status status =
        absl::InternalError(absl::StrCat("opening job store '", path, "': ",
                                         db ? sqlite3_errmsg(db) : "out of memory"));
    sqlite3_close(db);
    return status;
  }
  std::unique_ptr<JobStore> store(new JobStore(db));
  if (absl::Status prepared = Prepare(db); !prepared.ok()) {
    return absl::Status(
        prepared.code(),
        absl::StrCat("job store '", path, "': ", prepared.message()));
  }
  return store;
}

JobStore::~JobStore() {
  absl::MutexLock lock(&mutex_);
  sqlite3_close(db_);
}

absl::Status JobStore::LimitSize(int64_t max_bytes) {
  absl::MutexLock lock(&mutex_);
  Statement page_size(db_, "PRAGMA page_size");
  RETURN_IF_ERROR(page_size.status());
  ASSIGN_OR_RETURN(const bool row, page_size.Step());
  const int64_t bytes_per_page = row ? page_size.Int(0) : 4096;
  int64_t database_pages = kNoPageLimit;
  int64_t wal_pages = kDefaultWalCheckpointPages;
  int64_t wal_bytes = kNoJournalSizeLimit;
  if (max_bytes > 0) {
    // The log's share, checkpointed into the database once full and cut
    // back to it after; the database has the rest.
    wal_bytes = std::min(max_bytes / kWalShareDivisor,
                         kDefaultWalCheckpointPages * bytes_per_page);
    wal_pages = std::max<int64_t>(
        1, wal_bytes / (bytes_per_page + kWalFrameHeaderBytes));
    database_pages =
        std::max<int64_t>(1, (max_bytes - wal_bytes) / bytes_per_page);
  }
  RETURN_IF_ERROR(Execute(
      db_, absl::StrCat("PRAGMA max_page_count = ", database_pages).c_str()));
  RETURN_IF_ERROR(Execute(
      db_, absl::StrCat("PRAGMA wal_autocheckpoint = ", wal_pages).c_str()));
  RETURN_IF_ERROR(Execute(
      db_, absl::StrCat("PRAGMA journal_size_limit = ", wal_bytes).c_str()));
  // The log starts empty: what it holds already (the schema just created,
  // or a log of a store opened without a limit) may be past its share.
  return Execute(db_, "PRAGMA wal_checkpoint(TRUNCATE)");
}

absl::Status JobStore::Put(const chimera::v1::Job& job) {
  absl::MutexLock lock(&mutex_);
  // An upsert keeps the row's seq, and with it the job's place in the queue.
  Statement put(db_,
                "INSERT INTO jobs (id, state, job) VALUES (?1, ?2, ?3) "
                "ON CONFLICT(id) DO UPDATE SET state = ?2, job = ?3");
  RETURN_IF_ERROR(put.status());
  put.Bind(1, job.id());
  put.Bind(2, static_cast<int64_t>(job.status().state()));
  put.BindBlob(3, job.SerializeAsString());
  return put.Step().status();
}

absl::StatusOr<chimera::v1::Job> JobStore::Get(const std::string& id) {
  absl::MutexLock lock(&mutex_);
  Statement get(db_, "SELECT job FROM jobs WHERE id = ?1");
  RETURN_IF_ERROR(get.status());
  get.Bind(1, id);
  ASSIGN_OR_RETURN(bool found, get.Step());
  if (!found) return absl::NotFoundError(absl::StrCat("no job '", id, "'"));
  return RowJob(id, get.Blob(0));
}

absl::StatusOr<std::vector<chimera::v1::Job>> JobStore::List(
    chimera::v1::JobState state) {
  absl::MutexLock lock(&mutex_);
  const bool all = state == chimera::v1::JOB_STATE_UNSPECIFIED;
  Statement list(
      db_, all ? "SELECT seq, id, job FROM jobs ORDER BY seq"
               : "SELECT seq, id, job FROM jobs WHERE state = ?1 ORDER BY seq");
  RETURN_IF_ERROR(list.status());
  if (!all) list.Bind(1, static_cast<int64_t>(state));
  return ListedJobs(list);
}

absl::StatusOr<std::vector<chimera::v1::Job>> JobStore::ListLive() {
  absl::MutexLock lock(&mutex_);
  Statement list(db_,
                 "SELECT seq, id, job FROM jobs WHERE state IN (?1, ?2) "
                 "ORDER BY seq");
  RETURN_IF_ERROR(list.status());
  list.Bind(1, static_cast<int64_t>(chimera::v1::JOB_STATE_PENDING));
  list.Bind(2, static_cast<int64_t>(chimera::v1::JOB_STATE_RUNNING));
  return ListedJobs(list);
}

absl::StatusOr<JobStore::Chunk> JobStore::ListAfter(int64_t after_seq,
                                                    int limit) {
  absl::MutexLock lock(&mutex_);
  Statement list(db_,
                 "SELECT seq, id, job FROM jobs WHERE seq > ?1 ORDER BY seq "
                 "LIMIT ?2");
  RETURN_IF_ERROR(list.status());
  list.Bind(1, after_seq);
  list.Bind(2, static_cast<int64_t>(limit));
  Chunk chunk{.last_seq = after_seq};
  int rows = 0;
  while (true) {
    ASSIGN_OR_RETURN(bool row, list.Step());
    if (!row) break;
    ++rows;
    chunk.last_seq = list.Int(0);
    std::optional<chimera::v1::Job> job =
        ListedJob(chunk.last_seq, list.Text(1), list.Blob(2));
    if (job) chunk.jobs.push_back({chunk.last_seq, *std::move(job)});
  }
  chunk.end = rows < limit;
  return chunk;
}

absl::StatusOr<JobStore::Page> JobStore::ListPage(chimera::v1::JobState state,
                                                  int64_t after_seq,
                                                  int max_jobs,
                                                  int64_t max_bytes) {
  Page page;
  int64_t bytes = 0;
  // The store is read in chunks, since a state filter may skip most rows.
  const int chunk = std::max(max_jobs, 64);
  while (true) {
    ASSIGN_OR_RETURN(Chunk stored, ListAfter(after_seq, chunk));
    for (Sequenced& row : stored.jobs) {
      chimera::v1::Job& job = row.job;
      if (state != chimera::v1::JOB_STATE_UNSPECIFIED &&
          job.status().state() != state) {
        after_seq = row.seq;
        continue;
      }
      const int64_t size = static_cast<int64_t>(job.ByteSizeLong());
      if (static_cast<int>(page.jobs.size()) == max_jobs ||
          (!page.jobs.empty() && bytes + size > max_bytes)) {
        page.next_after_seq = after_seq;
        return page;
      }
      bytes += size;
      after_seq = row.seq;
      page.jobs.push_back(std::move(job));
    }
    if (stored.end) return page;
    after_seq = stored.last_seq;
  }
}

absl::Status JobStore::Delete(const std::string& id) {
  absl::MutexLock lock(&mutex_);
  RETURN_IF_ERROR(Execute(db_, "BEGIN IMMEDIATE"));
  Statement remove(db_, "DELETE FROM jobs WHERE id = ?1");
  Statement history(db_, "DELETE FROM steps WHERE job_id = ?1");
  absl::Status status = remove.status().ok() ? history.status() : remove.status();
  if (status.ok()) {
    remove.Bind(1, id);
    history.Bind(1, id);
    status = remove.Step().status();
    if (status.ok() && sqlite3_changes(db_) == 0) {
      status = absl::NotFoundError(absl::StrCat("no job '", id, "'"));
    }
    if (status.ok()) status = history.Step().status();
  }
  RETURN_IF_ERROR(Execute(db_, status.ok() ? "COMMIT" : "ROLLBACK"));
  return status;
}

absl::Status JobStore::AppendStep(const std::string& id,
                                  const chimera::v1::StepSummary& step) {
  absl::MutexLock lock(&mutex_);
  Statement append(db_,
                   "INSERT OR REPLACE INTO steps (job_id, step, summary) "
                   "VALUES (?1, ?2, ?3)");
  RETURN_IF_ERROR(append.status());
  append.Bind(1, id);
  append.Bind(2, static_cast<int64_t>(step.step()));
  append.BindBlob(3, step.SerializeAsString());
  return append.Step().status();
}

absl::StatusOr<std::vector<chimera::v1::StepSummary>> JobStore::Steps(
    const std::string& id, int after) {
  absl::MutexLock lock(&mutex_);
  Statement steps(db_,
                  "SELECT summary FROM steps WHERE job_id = ?1 AND step > ?2 ORDER BY step");
  RETURN_IF_ERROR(steps.status());
  steps.Bind(1, id);
  steps.Bind(2, static_cast<int64_t>(after));
  std::vector<chimera::v1::StepSummary> history;
  while (true) {
    ASSIGN_OR_RETURN(bool row, steps.Step());
    if (!row) break;
    ASSIGN_OR_RETURN(chimera::v1::StepSummary step,
                     Decode<chimera::v1::StepSummary>(steps.Blob(0), "step summary"));
    history.push_back(std::move(step));
  }
  return history;
}

}  // namespace chimera::coordinator
