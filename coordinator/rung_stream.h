// RungStream: a server stream as a gRPC callback reactor that holds no
// thread while it waits: whatever has something for it rings its doorbell.
// A subclass says what to write next; RungStream writes it, one write at a
// time, each time the doorbell rings or a write completes, and finishes
// exactly once: when the subclass says so, the client goes away, a write
// fails, or the coordinator stops (UNAVAILABLE, so that clients come back
// to its successor). It deletes itself once done.
//
//   class AssignmentStream final : public RungStream<Assignment> {
//     AssignmentStream(...) : RungStream(stopping) {
//       registry->Watch(..., doorbell());   // the registry rings it
//       Pump();
//     }
//     absl::StatusOr<std::optional<Assignment>> NextLocked() override;
//     void Forget(const Doorbell& doorbell) override;  // Unwatch
//   };
#ifndef CHIMERA_COORDINATOR_RUNG_STREAM_H_
#define CHIMERA_COORDINATOR_RUNG_STREAM_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "coordinator/doorbell.h"
#include "coordinator/grpc_util.h"

namespace chimera::coordinator {

template <typename Message>
class RungStream : public grpc::ServerWriteReactor<Message> {
 public:
  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mutex_);
      writing_ = false;
      if (!ok) {
        FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the stream broke"));
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
    Forget(*doorbell_);
    delete this;
  }

 protected:
  explicit RungStream(const absl::Notification* stopping)
      : stopping_(stopping), doorbell_(std::make_shared<Doorbell>([this] { Pump(); })) {}
  ~RungStream() override = default;

  // What rings this stream; hand it to whatever will.
  const std::shared_ptr<Doorbell>& doorbell() const { return doorbell_; }

  // Finishes at once (a refused call).
  void Refuse(const grpc::Status& status) {
    absl::MutexLock lock(&mutex_);
    FinishLocked(status);
  }

  // Starts writing the next message unless a write is under way.
  void Pump() {
    absl::MutexLock lock(&mutex_);
    if (writing_ || finished_) return;
    if (stopping_->HasBeenNotified()) {
      FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                "the coordinator is shutting down"));
      return;
    }
    absl::StatusOr<std::optional<Message>> next = NextLocked();
    if (!next.ok()) {
      FinishLocked(ToGrpcStatus(next.status()));
      return;
    }
    if (!next->has_value()) {
      if (CompleteLocked()) FinishLocked(grpc::Status::OK);
      return;
    }
    writing_ = true;
    sending_ = **std::move(next);
    this->StartWrite(&sending_);
  }

  // The next message to write; nullopt when none is due yet; an error to
  // finish the stream with.
  virtual absl::StatusOr<std::optional<Message>> NextLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) = 0;
  // Whether, with nothing due, the stream is complete (it then finishes OK).
  virtual bool CompleteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) { return false; }
  // Stops whatever rings `doorbell` from keeping it (the stream is done).
  virtual void Forget(const Doorbell& doorbell) = 0;

  // Guards the subclass's state too: NextLocked and CompleteLocked run under it.
  absl::Mutex mutex_;

 private:
  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    if (finished_) return;
    finished_ = true;
    this->Finish(status);
  }

  const absl::Notification* const stopping_;
  const std::shared_ptr<Doorbell> doorbell_;
  bool writing_ ABSL_GUARDED_BY(mutex_) = false;
  bool finished_ ABSL_GUARDED_BY(mutex_) = false;
  Message sending_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_RUNG_STREAM_H_
