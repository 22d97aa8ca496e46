// One gradient group's collectives on the CPU (allreduce, and for sharded
// stages all-gather and reduce-scatter), run in the order they were started
// on a thread of the group's own: through shared memory when every member of
// the group runs on this host (shared_memory_collectives.h), through `tcp`
// (Gloo) otherwise. The members decide together at the group's first
// collective, and again whenever a tensor outgrows the shared segments.
//
//   GroupCollectives collectives(options, [&](Collective c, const at::Tensor&
//   t) {
//     return RunOverGloo(c, t);  // blocking
//   });
//   std::unique_ptr<PendingOp> op = collectives.Start(Collective::kSum, grads);
//   RETURN_IF_ERROR(op->Wait(timeout));
#ifndef CHIMERA_WORKER_COMM_GROUP_COLLECTIVES_H_
#define CHIMERA_WORKER_COMM_GROUP_COLLECTIVES_H_

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
#include "worker/comm/shared_memory_collectives.h"

namespace chimera::worker {
namespace comm_internal {
struct QueuedCollective;  // group_collectives.cc
}  // namespace comm_internal

// Communicator's AllReduceSum, AllGather and ReduceScatterSum.
enum class Collective { kSum, kAllGather, kReduceScatterSum };

// "allreduce in group 'stage-3'", "all-gather in group ...", "reduce-scatter
// in group ...": how errors name a collective.
std::string DescribeCollective(Collective collective, absl::string_view group);

struct GroupCollectivesOptions {
  c10::intrusive_ptr<c10d::Store> store;
  std::string key_prefix;  // unique to the group within the job
  int rank = 0;            // within the group
  int size = 1;
  bool shared_memory = true;  // false: this member declines shared memory
  // Bounds each collective inside the thread and the members' rendezvous.
  absl::Duration timeout = kDefaultCollectiveTimeout;
  std::string group;  // its name, for messages
};

class GroupCollectives {
 public:
  // Runs a collective over the group, blocking until done.
  using Run = std::function<absl::Status(Collective, const at::Tensor&)>;

  GroupCollectives(GroupCollectivesOptions options, Run tcp);
  // Cancels what is queued or running and joins the thread.
  ~GroupCollectives();
  GroupCollectives(const GroupCollectives&) = delete;
  GroupCollectives& operator=(const GroupCollectives&) = delete;

  // Queues `collective` on `tensor` (kept alive until it is done).
  std::unique_ptr<PendingOp> Start(Collective collective, at::Tensor tensor);

  // Whether the group runs through shared memory; known after the first
  // collective has finished.
  bool uses_shared_memory() const { return shared_memory_in_use_.load(); }

 private:
  using Job = comm_internal::QueuedCollective;

  void Serve();
  absl::Status Execute(const Job& job);
  // Joins shared segments that hold `bytes`, or settles on TCP for good.
  absl::Status PrepareSharedMemory(size_t bytes);

  const GroupCollectivesOptions options_;
  const Run tcp_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> shared_memory_in_use_{false};

  // Touched by the thread only.
  std::unique_ptr<SharedMemoryCollectives> shared_;
  bool tcp_only_ = false;
  int joins_ = 0;

  absl::Mutex mu_;
  std::deque<std::shared_ptr<Job>> queue_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_COMM_GROUP_COLLECTIVES_H_
