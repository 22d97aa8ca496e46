#include "coordinator/assignment_stream.h"

#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/doorbell.h"
#include "coordinator/grpc_util.h"

namespace chimera::coordinator {
namespace {

class AssignmentStream final : public grpc::ServerWriteReactor<chimera::v1::Assignment> {
 public:
  // Finishes at once with `refused` when it is not OK.
  AssignmentStream(WorkerRegistry* workers, const absl::Notification* stopping,
                   const chimera::v1::WatchAssignmentsRequest& request,
                   const grpc::Status& refused)
      : workers_(workers),
        stopping_(stopping),
        worker_id_(request.worker_id()),
        incarnation_(request.incarnation()),
        doorbell_(std::make_shared<Doorbell>([this] { Pump(); })) {
    if (!refused.ok()) {
      absl::MutexLock lock(&mutex_);
      FinishLocked(refused);
      return;
    }
    const absl::Status watched = workers_->Watch(worker_id_, incarnation_, doorbell_);
    if (!watched.ok()) {
      absl::MutexLock lock(&mutex_);
      FinishLocked(ToGrpcStatus(watched));
      return;
    }
    Pump();
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mutex_);
      writing_ = false;
      if (!ok) {
        FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "assignment stream broke"));
        return;
      }
    }
    Pump();
  }

  void OnCancel() override {
    absl::MutexLock lock(&mutex_);
    FinishLocked(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    doorbell_->Detach();
    workers_->Unwatch(worker_id_, doorbell_.get());
    delete this;
  }

 private:
  // Starts writing the next queued assignment, unless a write is under way;
  // finishes the stream once its incarnation or the coordinator is gone.
  void Pump() {
    absl::MutexLock lock(&mutex_);
    if (writing_ || finished_) return;
    if (stopping_->HasBeenNotified()) {
      // UNAVAILABLE tells the worker to reconnect (to a restarted coordinator).
      FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                "the coordinator is shutting down"));
      return;
    }
    absl::StatusOr<std::optional<chimera::v1::Assignment>> next =
        workers_->TakeAssignment(worker_id_, incarnation_);
    if (!next.ok()) {
      FinishLocked(ToGrpcStatus(next.status()));
      return;
    }
    if (!next->has_value()) return;
    writing_ = true;
    sending_ = **std::move(next);
    StartWrite(&sending_);
  }

  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  WorkerRegistry* const workers_;
  const absl::Notification* const stopping_;
  const std::string worker_id_;
  const uint64_t incarnation_;
  const std::shared_ptr<Doorbell> doorbell_;
  absl::Mutex mutex_;
  bool writing_ ABSL_GUARDED_BY(mutex_) = false;
  bool finished_ ABSL_GUARDED_BY(mutex_) = false;
  chimera::v1::Assignment sending_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace

grpc::ServerWriteReactor<chimera::v1::Assignment>* NewAssignmentStream(
    WorkerRegistry* workers, const absl::Notification* stopping,
    const chimera::v1::WatchAssignmentsRequest& request, const grpc::Status& refused) {
  return new AssignmentStream(workers, stopping, request, refused);
}

}  // namespace chimera::coordinator
