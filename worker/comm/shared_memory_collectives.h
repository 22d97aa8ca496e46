// Collectives among ranks of one host through shared memory. Each member
// owns a segment as large as the largest tensor, and member m is the one that
// sums slice m of a tensor: its shard in the sharded collectives' layout
// (ShardOf in communicator.h).
// - Sum: every member copies its tensor into its own segment, member m adds
//   up slice m of all segments (in rank order) and publishes it in its own
//   segment, and every member copies the other members' summed slices out.
// - ReduceScatterSum: the same without the last step; each member keeps
//   only its own summed slice.
// - AllGather: every member copies its own slice into its segment and the
//   other members' slices out of theirs.
// Each slice is summed by one member only, so all members end with the same
// bits, and ReduceScatterSum's slice equals Sum's. Per member and byte a Sum
// is about two copies and a sum, against Gloo's TCP ring on loopback, where
// every byte also passes through the kernel twice each way: measured with
// two ranks on one 2-vCPU VM, 144 MB summed in 0.035 s against 0.15 s
// (docs/runtime-measurements.md).
//
// The members step through phases (three per Sum, two per other collective)
// and wait for each other's phase counters in the segments' headers with
// futexes, so a waiting member uses no CPU and a slow or dead one ends in
// DEADLINE_EXCEEDED. Every member calls the same collectives in the same
// order.
//
//   ASSIGN_OR_RETURN(auto group, SharedMemoryCollectives::Join(
//                                    store, "chimera/shm/stage-1/0", rank,
//                                    size, tensor.nbytes(), options));
//   RETURN_IF_ERROR(group->Sum(tensor, timeout));
#ifndef CHIMERA_WORKER_COMM_SHARED_MEMORY_COLLECTIVES_H_
#define CHIMERA_WORKER_COMM_SHARED_MEMORY_COLLECTIVES_H_

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/comm/communicator.h"
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
  // Set by another thread to make a blocked Join or collective return CANCELLED
  // (within a tenth of a second). May be null.
  const std::atomic<bool>* cancelled = nullptr;
};

class SharedMemoryCollectives {
 public:
  // Every member of the group (ranks 0..size-1 within it) calls Join with the
  // same key prefix (unique per group and attempt) and capacity. The group
  // when every member created its segment and mapped every other's;
  // otherwise FAILED_PRECONDITION, the same verdict on every member, saying
  // why (members on different hosts, a full /dev/shm, a member that declined):
  // sum some other way then. UNAVAILABLE when the store does not answer.
  static absl::StatusOr<std::unique_ptr<SharedMemoryCollectives>> Join(
      const c10::intrusive_ptr<c10d::Store>& store,
      const std::string& key_prefix, int rank, int size, size_t capacity_bytes,
      const SharedMemoryOptions& options);

  // Sums `tensor` (dense, contiguous, on the CPU, at most capacity() bytes)
  // in place. Every member calls it with a tensor of the same size and dtype,
  // in the same order. DEADLINE_EXCEEDED naming the member that did not
  // arrive within `timeout`; CANCELLED when cancelled.
  absl::Status Sum(const at::Tensor& tensor, absl::Duration timeout);

  // Sums `tensor` into this member's shard of it (Communicator's
  // ReduceScatterSum); called and failing as Sum.
  absl::Status ReduceScatterSum(const at::Tensor& tensor,
                                absl::Duration timeout);

  // Gathers every member's shard of `tensor` (Communicator's AllGather);
  // called and failing as Sum.
  absl::Status AllGather(const at::Tensor& tensor, absl::Duration timeout);

  size_t capacity() const { return capacity_; }

 private:
  SharedMemoryCollectives(int rank, std::vector<SharedMemorySegment> segments,
                          size_t capacity, const std::atomic<bool>* cancelled);

  // The flattened `tensor` when it fits the segments, INVALID_ARGUMENT
  // naming `operation` otherwise.
  absl::StatusOr<at::Tensor> Flat(const char* operation,
                                  const at::Tensor& tensor) const;
  // The steps Sum and ReduceScatterSum share: every member copies `flat`
  // into its segment (phase_ + 1), then sums its own shard of all segments
  // into its shard of `flat`.
  absl::Status SumOwnShard(const at::Tensor& flat, absl::Time deadline,
                           const char* what);
  // The end of Sum and AllGather, `steps_done` phases into the collective,
  // when this member's shard of `flat` holds its result: it publishes that
  // shard in its segment, waits for the other members' and copies them into
  // `flat`.
  absl::Status ExchangeShards(const at::Tensor& flat, uint32_t steps_done,
                              absl::Time deadline, const char* what);
  absl::Status AwaitPreviousCollective(absl::Time deadline) const;
  // Waits until every other member's phase counter reached `phase`.
  absl::Status AwaitPhase(uint32_t phase, absl::Time deadline,
                          const char* what) const;
  void PublishPhase(uint32_t phase);
  // Member `member`'s segment, as a flat tensor like `like`.
  at::Tensor View(int member, const at::Tensor& like) const;
  // Member `member`'s shard of the flat tensor `flat`.
  at::Tensor Shard(const at::Tensor& flat, int member) const;

  const int rank_;
  const std::vector<SharedMemorySegment> segments_;  // by member rank
  const size_t capacity_;
  const std::atomic<bool>* cancelled_;
  // The phase every member reached at the end of the last collective.
  uint32_t phase_ = 0;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_COMM_SHARED_MEMORY_COLLECTIVES_H_
