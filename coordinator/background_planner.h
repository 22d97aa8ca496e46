// BackgroundPlanner: searches the plan a queued job starts with, and prepares
// its launch (every rank's program, generated and validated), on a thread
// of its own, so that the coordinator's loop (dead workers, deadlines, the
// progress watchdog) and its lock never wait for a search, which can take
// seconds for a large model on a large cluster (and a large schedule's
// validation a good part of one). One search at a time, each
// with a budget: a search still running when it is spent is cancelled and
// ends DEADLINE_EXCEEDED, saying so. Destroying the planner (the coordinator
// stopping) cancels the search under way and waits for it to notice.
//
//   BackgroundPlanner planner({.budget = absl::Seconds(10)});
//   // every tick, for the head of the queue and the workers it would take:
//   planner.Start(key, [&](const std::function<bool()>& cancelled) {
//     return Search(job, workers, cancelled);
//   });
//   if (auto launch = planner.Take(key, /*wait=*/absl::Milliseconds(100)))
//     StartJob(*launch);
//
// Thread-safe.
#ifndef CHIMERA_COORDINATOR_BACKGROUND_PLANNER_H_
#define CHIMERA_COORDINATOR_BACKGROUND_PLANNER_H_

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/job_launcher.h"

namespace chimera::coordinator {

class BackgroundPlanner {
 public:
  // A search, which asks `cancelled` often (between candidates) and ends
  // soon once it says so.
  using Search = std::function<absl::StatusOr<Launch>(
      const std::function<bool()>& cancelled)>;

  explicit BackgroundPlanner(absl::Duration budget);
  ~BackgroundPlanner();
  BackgroundPlanner(const BackgroundPlanner&) = delete;
  BackgroundPlanner& operator=(const BackgroundPlanner&) = delete;

  // Begins `search` for `key` unless one for `key` runs or has ended
  // untaken. A search for another key is cancelled instead (its job no
  // longer heads the queue, or its workers changed): `key`'s begins once
  // that one has ended, at a later call.
  void Start(const std::string& key, Search search);

  // The result of the search for `key`, waiting up to `wait` for it to end;
  // nullopt while it runs (or none was started for `key`). A result is
  // given once. A search over its budget ends DEADLINE_EXCEEDED.
  std::optional<absl::StatusOr<Launch>> Take(
      const std::string& key, absl::Duration wait);

 private:
  void Run(Search search, absl::Time deadline);

  const absl::Duration budget_;
  mutable absl::Mutex mutex_;
  std::string key_ ABSL_GUARDED_BY(mutex_);
  bool running_ ABSL_GUARDED_BY(mutex_) = false;
  std::optional<absl::StatusOr<Launch>> result_
      ABSL_GUARDED_BY(mutex_);
  // Set to end the search under way early.
  std::atomic<bool> cancel_{false};
  std::thread thread_;
};

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_BACKGROUND_PLANNER_H_
