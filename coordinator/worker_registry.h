// WorkerRegistry: the workers the coordinator knows, their liveness and the
// task each runs, plus each worker's queue of assignments that its
// WatchAssignments stream delivers.
//
// A worker is identified by its id and told apart from an earlier run of
// itself by its incarnation: registering a new incarnation replaces the old
// one (whose task is then lost), a request carrying an old incarnation
// is ABORTED, and an old incarnation that registers again (a second daemon
// with the same id) is refused. A worker whose last heartbeat is older than the policy's
// DeadAfter() is dead, and forgotten forget_dead_after later.
//
//   WorkerRegistry registry({.period = absl::Seconds(1)});
//   registry.Register(request);
//   for (const DeadWorker& dead : registry.ReapDead()) FailJob(dead.task);
//
// Thread-safe.
#ifndef CHIMERA_COORDINATOR_WORKER_REGISTRY_H_
#define CHIMERA_COORDINATOR_WORKER_REGISTRY_H_

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "chimera/v1/service.pb.h"
#include "common/clock.h"
#include "coordinator/doorbell.h"

namespace chimera::coordinator {

struct HeartbeatPolicy {
  // How often workers heartbeat.
  absl::Duration period = absl::Seconds(1);
  // Deadline of one heartbeat RPC (told to workers).
  absl::Duration timeout = absl::Seconds(5);
  // Missed periods after which a worker is dead.
  int failure_threshold = 3;
  // How long a dead worker stays listed (as DEAD) before it is forgotten:
  // long enough to be seen, not so long that departed workers pile up.
  absl::Duration forget_dead_after = absl::Minutes(10);

  // How long a worker may stay silent before it is dead.
  absl::Duration DeadAfter() const { return period * failure_threshold; }
};

// One rank of one attempt of a job.
struct TaskRef {
  std::string job_id;
  int attempt = 0;
  int rank = 0;
};

struct DeadWorker {
  std::string worker_id;
  // The task it was running, if any.
  std::optional<TaskRef> task;
};

class WorkerRegistry {
 public:
  // Liveness is judged on `clock`'s monotonic clock.
  explicit WorkerRegistry(HeartbeatPolicy policy, Clock clock = {});

  const HeartbeatPolicy& policy() const { return policy_; }

  // Adds or replaces a worker. Returns the task the replaced incarnation was
  // running, which is lost. ALREADY_EXISTS for an incarnation that a newer
  // one replaced: it is still alive, so two daemons share one id, and
  // letting it back in would have them evict each other for ever. Its
  // message names the host, node and incarnation that hold the id, and
  // since when.
  absl::StatusOr<std::optional<TaskRef>> Register(
      const chimera::v1::RegisterWorkerRequest& request);
  // NOT_FOUND for an unknown worker, ABORTED for another incarnation (the
  // worker must register again). `position` says where the worker's task
  // is (WorkerInfo.task_position while it names that task).
  absl::Status Heartbeat(const std::string& worker_id, uint64_t incarnation,
                         const chimera::v1::TaskPosition& position = {});
  absl::Status CheckIncarnation(const std::string& worker_id,
                                uint64_t incarnation) const;

  // The coordinator itself was stalled for `stall` (stopped, or starved of
  // CPU): no heartbeat could be heard meanwhile, so that silence counts
  // against no worker. Each live worker's last heartbeat moves `stall` later
  // (never past now).
  void ExcuseSilence(absl::Duration stall);

  // Marks workers without a recent heartbeat dead and returns those newly
  // dead; their tasks are cleared and their assignment queues closed.
  // Forgets workers dead for longer than the policy's forget_dead_after.
  std::vector<DeadWorker> ReapDead();

  // Alive workers without a task, in registration order.
  std::vector<std::string> IdleWorkers() const;
  std::vector<chimera::v1::WorkerInfo> List() const;
  absl::StatusOr<chimera::v1::WorkerInfo> Get(const std::string& worker_id) const;

  // Records the task a worker runs, and queues `assignment` (if any; a
  // start may follow later with Send) for its stream. FAILED_PRECONDITION if
  // it is dead or already busy.
  absl::Status Assign(const std::string& worker_id, const TaskRef& task,
                      std::optional<chimera::v1::Assignment> assignment);
  // Records rank r of `attempt` of job `job_id` as the task of workers[r],
  // for every rank or none: FAILED_PRECONDITION naming the first worker that
  // is dead, busy or listed twice, and then no worker's task changed.
  absl::Status AssignRanks(const std::vector<std::string>& workers,
                           const std::string& job_id, int attempt);
  // Queues an assignment (a stop, or rank 0's peers' delayed start) without
  // changing the worker's task.
  void Send(const std::string& worker_id, chimera::v1::Assignment assignment);
  // The worker has no task any more.
  void Release(const std::string& worker_id);

  // The doorbell of this incarnation's assignment stream, replacing any
  // earlier one; ABORTED when the incarnation is replaced or dead. It rings
  // whenever an assignment is queued for the incarnation, the incarnation
  // ends, or RingAll asks, never under the registry's lock (the stream calls
  // back into it).
  absl::Status Watch(const std::string& worker_id, uint64_t incarnation,
                     std::shared_ptr<Doorbell> doorbell);
  // Forgets `doorbell` if it is still the worker's.
  void Unwatch(const std::string& worker_id, const Doorbell* doorbell);
  // Rings every doorbell (the coordinator is shutting down).
  void RingAll();

  // The next assignment of this incarnation, nullopt when none is queued.
  // ABORTED once the incarnation is replaced or dead: the stream must end.
  absl::StatusOr<std::optional<chimera::v1::Assignment>> TakeAssignment(
      const std::string& worker_id, uint64_t incarnation);

 private:
  struct Worker {
    chimera::v1::RegisterWorkerRequest registration;
    // When `registration` was made (wall clock).
    absl::Time registered_at;
    // On the monotonic clock, for liveness; on the wall clock, for users.
    absl::Time last_heartbeat;
    absl::Time last_heartbeat_wall;
    bool dead = false;
    std::optional<TaskRef> task;
    // Where a task was at the last heartbeat that said.
    chimera::v1::TaskPosition position;
    std::deque<chimera::v1::Assignment> queue;
    // Its stream's, while one watches.
    std::shared_ptr<Doorbell> doorbell;
    uint64_t sequence = 0;  // Registration order.
    // The incarnations this id had before, latest last (a few at most).
    std::deque<uint64_t> replaced;
  };

  chimera::v1::WorkerInfo InfoLocked(const Worker& worker) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The work of Register and ReapDead, under the lock; they ring the
  // doorbells of the streams it ends once it is released.
  absl::StatusOr<std::optional<TaskRef>> Admit(
      const chimera::v1::RegisterWorkerRequest& request,
      std::shared_ptr<Doorbell>& replaced_stream) ABSL_LOCKS_EXCLUDED(mutex_);
  std::vector<DeadWorker> MarkDeadAndForget(
      std::vector<std::shared_ptr<Doorbell>>& ended_streams) ABSL_LOCKS_EXCLUDED(mutex_);
  // The live worker `worker_id` when it runs no task; FAILED_PRECONDITION
  // naming it when it is dead or busy.
  absl::StatusOr<Worker*> IdleLocked(const std::string& worker_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The live worker `worker_id` if it is still `incarnation`; null if not.
  Worker* CurrentLocked(const std::string& worker_id, uint64_t incarnation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const HeartbeatPolicy policy_;
  const Clock clock_;
  mutable absl::Mutex mutex_;
  std::map<std::string, Worker> workers_ ABSL_GUARDED_BY(mutex_);
  uint64_t next_sequence_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_WORKER_REGISTRY_H_
