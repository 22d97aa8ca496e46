// JobEventStreams: the coordinator's WatchJob streams (clients following a
// job) as gRPC callback reactors, so that a follower holds no thread while
// it waits. One thread waits for the job manager to change and rings every
// open stream; a rung stream writes the steps and status its client has not
// seen, one write at a time, and finishes once its job has ended.
//
//   JobEventStreams streams(&jobs, &stopping);
//   return streams.Open(*request, refused);     // in the WatchJob handler
//   ...
//   stopping.Notify(); jobs.WakeWaiters();       // streams end UNAVAILABLE
#ifndef CHIMERA_COORDINATOR_JOB_EVENT_STREAMS_H_
#define CHIMERA_COORDINATOR_JOB_EVENT_STREAMS_H_

#include <memory>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "chimera/v1/service.pb.h"
#include "coordinator/doorbell.h"
#include "coordinator/job_manager.h"

namespace chimera::coordinator {

class JobEventStreams {
 public:
  // Streams end UNAVAILABLE once `stopping` is notified and the job
  // manager wakes its waiters (JobManager::WakeWaiters). The job manager
  // must outlive this, and this every stream it opened.
  JobEventStreams(JobManager* jobs, const absl::Notification* stopping);
  ~JobEventStreams();
  JobEventStreams(const JobEventStreams&) = delete;
  JobEventStreams& operator=(const JobEventStreams&) = delete;

  // A stream following `request`'s job; it finishes at once with `refused`
  // when that is not OK (a bad token or request).
  grpc::ServerWriteReactor<chimera::v1::JobEvent>* Open(
      const chimera::v1::WatchJobRequest& request, const grpc::Status& refused);

 private:
  class Stream;

  void Add(std::shared_ptr<Doorbell> doorbell);
  void Remove(const Doorbell* doorbell);
  void RingOnEveryChange();

  JobManager* const jobs_;
  const absl::Notification* const stopping_;
  absl::Mutex mutex_;
  std::vector<std::shared_ptr<Doorbell>> doorbells_ ABSL_GUARDED_BY(mutex_);
  bool closing_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread ringer_;
};

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_JOB_EVENT_STREAMS_H_
