// JobTable: the coordinator's one view of its jobs. The live ones (pending
// or running) are held in memory, so that the queue and every step are read
// without touching the disk; every change is written through to the
// JobStore first and shown only once the store has taken it. Ended jobs no
// longer change and are read from the store.
//
// A request (submit, stop, a step) the store refuses is refused to its
// caller. An outcome that has already happened cannot be: a run that ended
// has freed its workers whether or not the store records it. Such an
// outcome is kept, in order, and written again at each Retry. Until every
// kept outcome is recorded the store's error is sticky, as leveldb's
// background error is: every change is refused, RESOURCE_EXHAUSTED when the
// store is full and UNAVAILABLE otherwise, and reads go on showing what the
// store holds.
//
//   JobTable table(store);
//   RETURN_IF_ERROR(table.Load());
//   RETURN_IF_ERROR(table.Put(submitted));
//   if (!table.Record(ended).ok()) { /* kept; table.Retry() every tick */ }
//
// Not thread-safe: its owner calls it under its own lock. Since the store
// holds exactly what the table shows, pages of jobs and step histories may
// be read from the store directly, without that lock.
#ifndef CHIMERA_COORDINATOR_JOB_TABLE_H_
#define CHIMERA_COORDINATOR_JOB_TABLE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "chimera/v1/service.pb.h"
#include "coordinator/job_store.h"

namespace chimera::coordinator {

class JobTable {
 public:
  explicit JobTable(JobStore* store) : store_(store) {}

  // Reads the live jobs from the store, in submission order; what the table
  // held before is forgotten.
  absl::Status Load();

  // NOT_FOUND for an unknown id; DATA_LOSS for a damaged row (JobStore::Get).
  absl::StatusOr<chimera::v1::Job> Get(const std::string& id) const;
  // The job if it is live; nullopt for an ended or unknown one, which the
  // store answers for (its owner may read it there without its lock).
  std::optional<chimera::v1::Job> FindLive(const std::string& id) const;
  // The live jobs in `state` (PENDING or RUNNING), oldest submission first.
  std::vector<chimera::v1::Job> Live(chimera::v1::JobState state) const;
  // The oldest of them, without copying the others (the queue's head, asked
  // for at every tick).
  std::optional<chimera::v1::Job> OldestLive(chimera::v1::JobState state) const;

  // A requested change: the sticky error while an outcome waits to be
  // recorded, else the store's own when it refuses this one (nothing
  // changes then).
  absl::Status Put(const chimera::v1::Job& job);
  // An outcome that has happened: written now if the store takes it, else
  // kept for Retry, the returned error made sticky.
  absl::Status Record(const chimera::v1::Job& job);
  // Writes the kept outcomes, oldest first, up to the first the store still
  // refuses; how many it wrote.
  int Retry();
  // The error every change is refused with while outcomes wait; OK when
  // none does.
  absl::Status Writable() const;

  // Removes an ended job and its history (refused while outcomes wait).
  absl::Status Delete(const std::string& id);
  // Appends a step to a job's history (refused while outcomes wait).
  absl::Status AppendStep(const std::string& id,
                          const chimera::v1::StepSummary& step);

 private:
  struct LiveJob {
    int64_t order = 0;  // Submission order.
    chimera::v1::Job job;
  };

  // Writes `job` to the store, then shows it.
  absl::Status WriteThrough(const chimera::v1::Job& job);

  JobStore* const store_;
  std::map<std::string, LiveJob> live_;
  int64_t next_order_ = 0;
  // Outcomes the store refused, oldest first, and why the first was.
  std::deque<chimera::v1::Job> unrecorded_;
  absl::Status refused_;
};

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_JOB_TABLE_H_
