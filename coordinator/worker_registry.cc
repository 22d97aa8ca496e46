#include "coordinator/worker_registry.h"

#include <algorithm>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace chimera::coordinator {
namespace {

// Old incarnations kept per worker id to recognise a second live daemon.
constexpr size_t kRememberedIncarnations = 8;

absl::Status NoLongerRegistered(const std::string& worker_id, uint64_t incarnation) {
  return absl::AbortedError(absl::StrCat("worker '", worker_id, "' incarnation ",
                                         incarnation, " is no longer registered"));
}

void RingEach(const std::vector<std::shared_ptr<Doorbell>>& doorbells) {
  for (const auto& doorbell : doorbells) {
    if (doorbell) doorbell->Ring();
  }
}

}  // namespace

WorkerRegistry::WorkerRegistry(HeartbeatPolicy policy, Clock clock)
    : policy_(policy), clock_(std::move(clock)) {}

absl::StatusOr<std::optional<TaskRef>> WorkerRegistry::Register(
    const chimera::v1::RegisterWorkerRequest& request) {
  std::shared_ptr<Doorbell> replaced_stream;
  absl::StatusOr<std::optional<TaskRef>> lost = Admit(request, replaced_stream);
  // The replaced incarnation's stream ends.
  if (replaced_stream) replaced_stream->Ring();
  return lost;
}

absl::StatusOr<std::optional<TaskRef>> WorkerRegistry::Admit(
    const chimera::v1::RegisterWorkerRequest& request,
    std::shared_ptr<Doorbell>& replaced_stream) {
  absl::MutexLock lock(&mutex_);
  auto [it, inserted] = workers_.try_emplace(request.worker_id());
  Worker& worker = it->second;
  const uint64_t incarnation = request.incarnation();
  if (absl::c_linear_search(worker.replaced, incarnation)) {
    // The refused daemon exits on this: it says where the other one runs.
    const chimera::v1::RegisterWorkerRequest& holder = worker.registration;
    return absl::AlreadyExistsError(absl::StrCat(
        "another daemon registered as worker '", request.worker_id(), "' from host ",
        holder.host(), " (node ", holder.node(), ", incarnation ", holder.incarnation(),
        ") at ", absl::FormatTime(absl::RFC3339_sec, worker.registered_at, absl::UTCTimeZone()),
        ", replacing this one (incarnation ", incarnation,
        "): two daemons share the id; give each its own --worker-id"));
  }
  std::optional<TaskRef> lost;
  if (inserted) {
    worker.sequence = next_sequence_++;
  } else {
    lost = worker.task;
    if (worker.registration.incarnation() != incarnation) {
      worker.replaced.push_back(worker.registration.incarnation());
      if (worker.replaced.size() > kRememberedIncarnations) worker.replaced.pop_front();
    }
  }
  worker.registration = request;
  worker.registered_at = clock_.wall();
  worker.last_heartbeat = clock_.monotonic();
  worker.last_heartbeat_wall = worker.registered_at;
  worker.dead = false;
  worker.task.reset();
  worker.queue.clear();
  replaced_stream = std::move(worker.doorbell);
  return lost;
}

absl::Status WorkerRegistry::CheckIncarnation(const std::string& worker_id,
                                              uint64_t incarnation) const {
  absl::MutexLock lock(&mutex_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) {
    return absl::NotFoundError(absl::StrCat("worker '", worker_id, "' is not registered"));
  }
  if (it->second.registration.incarnation() != incarnation || it->second.dead) {
    return absl::AbortedError(absl::StrCat(
        "worker '", worker_id, "' incarnation ", incarnation,
        it->second.dead ? " was declared dead" : " was replaced", "; register again"));
  }
  return absl::OkStatus();
}

absl::Status WorkerRegistry::Heartbeat(
    const std::string& worker_id, uint64_t incarnation,
    const chimera::v1::TaskPosition& position) {
  absl::Status status = CheckIncarnation(worker_id, incarnation);
  if (!status.ok()) return status;
  absl::MutexLock lock(&mutex_);
  Worker& worker = workers_[worker_id];
  worker.last_heartbeat = clock_.monotonic();
  worker.last_heartbeat_wall = clock_.wall();
  worker.position = position;
  return absl::OkStatus();
}

void WorkerRegistry::ExcuseSilence(absl::Duration stall) {
  absl::MutexLock lock(&mutex_);
  const absl::Time now = clock_.monotonic();
  for (auto& [id, worker] : workers_) {
    if (!worker.dead) {
      worker.last_heartbeat = std::min(now, worker.last_heartbeat + stall);
    }
  }
}

std::vector<DeadWorker> WorkerRegistry::ReapDead() {
  std::vector<std::shared_ptr<Doorbell>> ended_streams;
  std::vector<DeadWorker> dead = MarkDeadAndForget(ended_streams);
  RingEach(ended_streams);
  return dead;
}

std::vector<DeadWorker> WorkerRegistry::MarkDeadAndForget(
    std::vector<std::shared_ptr<Doorbell>>& ended_streams) {
  absl::MutexLock lock(&mutex_);
  const absl::Time deadline = clock_.monotonic() - policy_.DeadAfter();
  const absl::Time forgotten = deadline - policy_.forget_dead_after;
  std::vector<DeadWorker> dead;
  for (auto it = workers_.begin(); it != workers_.end();) {
    Worker& worker = it->second;
    if (worker.dead && worker.last_heartbeat < forgotten) {
      ended_streams.push_back(std::move(worker.doorbell));
      it = workers_.erase(it);
      continue;
    }
    if (!worker.dead && worker.last_heartbeat < deadline) {
      worker.dead = true;
      dead.push_back({it->first, worker.task});
      worker.task.reset();
      worker.queue.clear();
      ended_streams.push_back(worker.doorbell);
    }
    ++it;
  }
  return dead;
}

std::vector<std::string> WorkerRegistry::IdleWorkers() const {
  absl::MutexLock lock(&mutex_);
  std::vector<std::pair<uint64_t, std::string>> idle;
  for (const auto& [id, worker] : workers_) {
    if (!worker.dead && !worker.task) idle.push_back({worker.sequence, id});
  }
  std::sort(idle.begin(), idle.end());
  std::vector<std::string> ids;
  for (auto& [sequence, id] : idle) ids.push_back(std::move(id));
  return ids;
}

chimera::v1::WorkerInfo WorkerRegistry::InfoLocked(const Worker& worker) const {
  chimera::v1::WorkerInfo info;
  const auto& r = worker.registration;
  info.set_worker_id(r.worker_id());
  info.set_incarnation(r.incarnation());
  info.set_node(r.node());
  *info.mutable_devices() = r.devices();
  info.set_memory_bytes(r.memory_bytes());
  info.set_cpu_cores(r.cpu_cores());
  info.set_metrics_address(r.metrics_address());
  info.set_host(r.host());
  info.set_state(worker.dead   ? chimera::v1::WORKER_STATE_DEAD
                 : worker.task ? chimera::v1::WORKER_STATE_BUSY
                               : chimera::v1::WORKER_STATE_IDLE);
  if (worker.task) {
    info.set_job_id(worker.task->job_id);
    info.set_rank(worker.task->rank);
    // A position of an earlier task, or none, is not this task's.
    const TaskRef& task = *worker.task;
    if (worker.position.job_id() == task.job_id &&
        worker.position.attempt() == task.attempt &&
        worker.position.rank() == task.rank) {
      *info.mutable_task_position() = worker.position;
    }
  }
  info.set_last_heartbeat_time(
      absl::ToDoubleSeconds(worker.last_heartbeat_wall - absl::UnixEpoch()));
  return info;
}

std::vector<chimera::v1::WorkerInfo> WorkerRegistry::List() const {
  absl::MutexLock lock(&mutex_);
  std::vector<std::pair<uint64_t, chimera::v1::WorkerInfo>> ordered;
  for (const auto& [id, worker] : workers_) {
    ordered.push_back({worker.sequence, InfoLocked(worker)});
  }
  std::sort(ordered.begin(), ordered.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<chimera::v1::WorkerInfo> infos;
  for (auto& [sequence, info] : ordered) infos.push_back(std::move(info));
  return infos;
}

absl::StatusOr<chimera::v1::WorkerInfo> WorkerRegistry::Get(
    const std::string& worker_id) const {
  absl::MutexLock lock(&mutex_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) {
    return absl::NotFoundError(absl::StrCat("worker '", worker_id, "' is not registered"));
  }
  return InfoLocked(it->second);
}

absl::Status WorkerRegistry::Assign(const std::string& worker_id, const TaskRef& task,
                                    std::optional<chimera::v1::Assignment> assignment) {
  std::shared_ptr<Doorbell> stream;
  {
    absl::MutexLock lock(&mutex_);
    ASSIGN_OR_RETURN(Worker* const worker, IdleLocked(worker_id));
    worker->task = task;
    if (!assignment) return absl::OkStatus();
    worker->queue.push_back(*std::move(assignment));
    stream = worker->doorbell;
  }
  if (stream) stream->Ring();
  return absl::OkStatus();
}

absl::Status WorkerRegistry::AssignRanks(
    const std::vector<std::string>& workers, const std::string& job_id,
    int attempt) {
  absl::MutexLock lock(&mutex_);
  std::vector<Worker*> assigned;
  for (size_t rank = 0; rank < workers.size(); ++rank) {
    absl::StatusOr<Worker*> worker = IdleLocked(workers[rank]);
    if (!worker.ok()) {
      // Undone under the same lock: nobody saw the earlier ranks assigned.
      for (Worker* earlier : assigned) earlier->task.reset();
      return worker.status();
    }
    (*worker)->task = TaskRef{job_id, attempt, static_cast<int>(rank)};
    assigned.push_back(*worker);
  }
  return absl::OkStatus();
}

absl::StatusOr<WorkerRegistry::Worker*> WorkerRegistry::IdleLocked(
    const std::string& worker_id) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || it->second.dead) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker '", worker_id, "' is not alive"));
  }
  if (it->second.task) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker '", worker_id, "' already runs job ", it->second.task->job_id));
  }
  return &it->second;
}

void WorkerRegistry::Send(const std::string& worker_id,
                          chimera::v1::Assignment assignment) {
  std::shared_ptr<Doorbell> stream;
  {
    absl::MutexLock lock(&mutex_);
    auto it = workers_.find(worker_id);
    if (it == workers_.end() || it->second.dead) return;
    it->second.queue.push_back(std::move(assignment));
    stream = it->second.doorbell;
  }
  if (stream) stream->Ring();
}

void WorkerRegistry::Release(const std::string& worker_id) {
  absl::MutexLock lock(&mutex_);
  auto it = workers_.find(worker_id);
  if (it != workers_.end()) it->second.task.reset();
}

WorkerRegistry::Worker* WorkerRegistry::CurrentLocked(const std::string& worker_id,
                                                      uint64_t incarnation) {
  auto it = workers_.find(worker_id);
  return it != workers_.end() && !it->second.dead &&
                 it->second.registration.incarnation() == incarnation
             ? &it->second
             : nullptr;
}

absl::Status WorkerRegistry::Watch(const std::string& worker_id, uint64_t incarnation,
                                   std::shared_ptr<Doorbell> doorbell) {
  absl::MutexLock lock(&mutex_);
  Worker* worker = CurrentLocked(worker_id, incarnation);
  if (worker == nullptr) return NoLongerRegistered(worker_id, incarnation);
  worker->doorbell = std::move(doorbell);
  return absl::OkStatus();
}

void WorkerRegistry::Unwatch(const std::string& worker_id, const Doorbell* doorbell) {
  absl::MutexLock lock(&mutex_);
  auto it = workers_.find(worker_id);
  if (it != workers_.end() && it->second.doorbell.get() == doorbell) {
    it->second.doorbell.reset();
  }
}

void WorkerRegistry::RingAll() {
  std::vector<std::shared_ptr<Doorbell>> streams;
  {
    absl::MutexLock lock(&mutex_);
    for (const auto& [id, worker] : workers_) streams.push_back(worker.doorbell);
  }
  RingEach(streams);
}

absl::StatusOr<std::optional<chimera::v1::Assignment>> WorkerRegistry::TakeAssignment(
    const std::string& worker_id, uint64_t incarnation) {
  absl::MutexLock lock(&mutex_);
  Worker* worker = CurrentLocked(worker_id, incarnation);
  if (worker == nullptr) return NoLongerRegistered(worker_id, incarnation);
  if (worker->queue.empty()) return std::optional<chimera::v1::Assignment>();
  chimera::v1::Assignment next = std::move(worker->queue.front());
  worker->queue.pop_front();
  return std::optional<chimera::v1::Assignment>(std::move(next));
}

}  // namespace chimera::coordinator
