// Sum-allreduce among ranks of one host through shared memory. Each member
// owns a segment as large as the largest tensor; to sum, every member copies
// its tensor into its own segment, member r adds up slice r of all segments
// (in rank order) and publishes it in its own segment, and every member copies
// the other members' summed slices out. Each slice is summed by one member
// only, so all members end with the same bits. Per member and byte that is
// about two copies and a sum, against Gloo's TCP ring on loopback, where every
// byte also passes through the kernel twice each way: measured with two ranks
// on one 2-vCPU VM, 144 MB summed in 0.035 s against 0.15 s
// (docs/runtime-measurements.md).
//
// The members step through three phases per allreduce and wait for each
// other's phase counters in the segments' headers with futexes, so a waiting
// member uses no CPU and a slow or dead one ends in DEADLINE_EXCEEDED.
//
//   ASSIGN_OR_RETURN(auto group, SharedMemoryAllReduce::Join(
//                                    store, "chimera/shm/stage-1/0", rank,
//                                    size, tensor.nbytes(), options));
//   RETURN_IF_ERROR(group->Sum(tensor, timeout));
#ifndef CHIMERA_WORKER_COMM_SHARED_MEMORY_ALLREDUCE_H_
#define CHIMERA_WORKER_COMM_SHARED_MEMORY_ALLREDUCE_H_

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/comm/shared_memory.h"

namespace c10d {
class Store;
}  // namespace c10d

namespace chimera::worker {

struct SharedMemoryOptions {
  // False: this member declines, and so the whole group does.
  bool enabled = true;
  // Bounds the rendezvous through the store.
  absl::Duration timeout = absl::Minutes(1);
  // Set by another thread to make a blocked Join or Sum return CANCELLED
  // (within a tenth of a second). May be null.
  const std::atomic<bool>* cancelled = nullptr;
};

class SharedMemoryAllReduce {
 public:
  // Every member of the group (ranks 0..size-1 within it) calls Join with the
  // same key prefix (unique per group and attempt) and capacity. The group
  // when every member created its segment and mapped every other's;
  // otherwise FAILED_PRECONDITION, the same verdict on every member, saying
  // why (members on different hosts, a full /dev/shm, a member that declined):
  // sum some other way then. UNAVAILABLE when the store does not answer.
  static absl::StatusOr<std::unique_ptr<SharedMemoryAllReduce>> Join(
      const c10::intrusive_ptr<c10d::Store>& store,
      const std::string& key_prefix, int rank, int size, size_t capacity_bytes,
      const SharedMemoryOptions& options);

  // Sums `tensor` (dense, contiguous, on the CPU, at most capacity() bytes)
  // in place. Every member calls it with a tensor of the same size and dtype,
  // in the same order. DEADLINE_EXCEEDED naming the member that did not
  // arrive within `timeout`; CANCELLED when cancelled.
  absl::Status Sum(const at::Tensor& tensor, absl::Duration timeout);

  size_t capacity() const { return capacity_; }

 private:
  SharedMemoryAllReduce(int rank, std::vector<SharedMemorySegment> segments,
                        size_t capacity, const std::atomic<bool>* cancelled);

  // Waits until every other member's phase counter reached `phase`.
  absl::Status AwaitPhase(uint32_t phase, absl::Time deadline,
                          const char* what) const;
  void PublishPhase(uint32_t phase);
  at::Tensor View(int member, const at::Tensor& like) const;

  const int rank_;
  const std::vector<SharedMemorySegment> segments_;  // by member rank
  const size_t capacity_;
  const std::atomic<bool>* cancelled_;
  uint32_t sums_done_ = 0;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_COMM_SHARED_MEMORY_ALLREDUCE_H_
