#include "coordinator/assignment_stream.h"

#include <optional>
#include <string>

#include "coordinator/rung_stream.h"

namespace chimera::coordinator {
namespace {

class AssignmentStream final : public RungStream<chimera::v1::Assignment> {
 public:
  // Finishes at once with `refused` when it is not OK.
  AssignmentStream(WorkerRegistry* workers, const absl::Notification* stopping,
                   const chimera::v1::WatchAssignmentsRequest& request,
                   const grpc::Status& refused)
      : RungStream(stopping),
        workers_(workers),
        worker_id_(request.worker_id()),
        incarnation_(request.incarnation()) {
    if (!refused.ok()) {
      Refuse(refused);
      return;
    }
    const absl::Status watched = workers_->Watch(worker_id_, incarnation_, doorbell());
    if (!watched.ok()) {
      Refuse(ToGrpcStatus(watched));
      return;
    }
    Pump();
  }

 private:
  // The next queued assignment; ABORTED once the incarnation is gone.
  absl::StatusOr<std::optional<chimera::v1::Assignment>> NextLocked() override {
    return workers_->TakeAssignment(worker_id_, incarnation_);
  }

  void Forget(const Doorbell& doorbell) override { workers_->Unwatch(worker_id_, &doorbell); }

  WorkerRegistry* const workers_;
  const std::string worker_id_;
  const uint64_t incarnation_;
};

}  // namespace

grpc::ServerWriteReactor<chimera::v1::Assignment>* NewAssignmentStream(
    WorkerRegistry* workers, const absl::Notification* stopping,
    const chimera::v1::WatchAssignmentsRequest& request, const grpc::Status& refused) {
  return new AssignmentStream(workers, stopping, request, refused);
}

}  // namespace chimera::coordinator
