// AssignmentStream: one worker's WatchAssignments stream as a gRPC callback
// reactor. It holds no thread while it waits (a coordinator has a stream per
// worker): the registry rings its doorbell when an assignment is queued for
// the worker's incarnation or the incarnation ends, and it writes what is
// queued, one write at a time. It ends, deleting itself, when the
// incarnation ends, the worker goes away or the coordinator stops.
//
//   return NewAssignmentStream(&registry, &stopping, *request, refused);
#ifndef CHIMERA_COORDINATOR_ASSIGNMENT_STREAM_H_
#define CHIMERA_COORDINATOR_ASSIGNMENT_STREAM_H_

#include <grpcpp/grpcpp.h>

#include "absl/synchronization/notification.h"
#include "chimera/v1/service.pb.h"
#include "coordinator/worker_registry.h"

namespace chimera::coordinator {

// The stream for `request`; it finishes at once with `refused` when that is
// not OK (a bad token or a stale incarnation), and with UNAVAILABLE once
// `stopping` is notified and the registry rings it.
grpc::ServerWriteReactor<chimera::v1::Assignment>* NewAssignmentStream(
    WorkerRegistry* workers, const absl::Notification* stopping,
    const chimera::v1::WatchAssignmentsRequest& request, const grpc::Status& refused);

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_ASSIGNMENT_STREAM_H_
