// One gradient group's allreduces on the CPU, run in the order they were
// started on a thread of the group's own: through shared memory when every
// member of the group runs on this host (shared_memory_allreduce.h), through
// `tcp_sum` (Gloo) otherwise. The members decide together at the group's
// first allreduce, and again whenever a tensor outgrows the shared segments.
//
//   GroupAllReducer reducer(options, [&](const at::Tensor& t) {
//     return GlooSum(t);  // blocking
//   });
//   std::unique_ptr<PendingOp> op = reducer.Start(gradients);
//   RETURN_IF_ERROR(op->Wait(timeout));
#ifndef CHIMERA_WORKER_COMM_GROUP_ALLREDUCER_H_
#define CHIMERA_WORKER_COMM_GROUP_ALLREDUCER_H_

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/comm/communicator.h"
#include "worker/comm/shared_memory_allreduce.h"

namespace chimera::worker {
namespace comm_internal {
struct QueuedSum;  // group_allreducer.cc
}  // namespace comm_internal

struct GroupAllReducerOptions {
  c10::intrusive_ptr<c10d::Store> store;
  std::string key_prefix;  // unique to the group within the job
  int rank = 0;            // within the group
  int size = 1;
  bool shared_memory = true;  // false: this member declines shared memory
  // Bounds each allreduce inside the thread and the members' rendezvous.
  absl::Duration timeout = kDefaultCollectiveTimeout;
  std::string description;  // "allreduce in group 'stage-1'"
};

class GroupAllReducer {
 public:
  // Sums a tensor in place over the group, blocking until done.
  using Sum = std::function<absl::Status(const at::Tensor&)>;

  GroupAllReducer(GroupAllReducerOptions options, Sum tcp_sum);
  // Cancels what is queued or running and joins the thread.
  ~GroupAllReducer();
  GroupAllReducer(const GroupAllReducer&) = delete;
  GroupAllReducer& operator=(const GroupAllReducer&) = delete;

  // Queues a sum of `tensor` (kept alive until it is done).
  std::unique_ptr<PendingOp> Start(at::Tensor tensor);

  // Whether the group sums through shared memory; known after the first
  // allreduce has finished.
  bool uses_shared_memory() const { return shared_memory_in_use_.load(); }

 private:
  using Job = comm_internal::QueuedSum;

  void Run();
  absl::Status Reduce(const at::Tensor& tensor);
  // Joins shared segments that hold `bytes`, or settles on TCP for good.
  absl::Status PrepareSharedMemory(size_t bytes);

  const GroupAllReducerOptions options_;
  const Sum tcp_sum_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> shared_memory_in_use_{false};

  // Touched by the thread only.
  std::unique_ptr<SharedMemoryAllReduce> shared_;
  bool tcp_only_ = false;
  int joins_ = 0;

  absl::Mutex mu_;
  std::deque<std::shared_ptr<Job>> queue_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_COMM_GROUP_ALLREDUCER_H_
