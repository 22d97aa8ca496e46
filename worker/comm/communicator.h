// How workers exchange tensors: tagged asynchronous point-to-point sends and
// receives (activations, gradients); asynchronous collectives within a
// gradient group (every worker holding a replica of one stage): sum-allreduce,
// and for sharded stages all-gather and reduce-scatter; and a barrier.
// Implementations: Gloo over TCP for CPU tensors (gloo_communicator.h) and
// NCCL for CUDA tensors (nccl_communicator.h).
//
//   ASSIGN_OR_RETURN(std::unique_ptr<PendingOp> send,
//                    comm.Send(activation, /*peer=*/next_rank, tag));
//   ASSIGN_OR_RETURN(std::unique_ptr<PendingOp> sync,
//                    comm.AllReduceSum(gradients, "stage3"));
//   ...
//   RETURN_IF_ERROR(send->Wait(kDefaultP2pTimeout));
//   RETURN_IF_ERROR(sync->Wait(kDefaultCollectiveTimeout));
//
// Nothing blocks without a bound: every wait takes a timeout, and a peer that
// died or never answers turns into an error that names the operation and the
// peer. After any error the communicator is unusable (operations in flight
// may never complete); destroy it and rebuild the job's groups.
#ifndef CHIMERA_WORKER_COMM_COMMUNICATOR_H_
#define CHIMERA_WORKER_COMM_COMMUNICATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace at {
class Tensor;
}  // namespace at

namespace chimera::worker {

// Joining the process groups: every rank must arrive within this.
inline constexpr absl::Duration kDefaultConnectTimeout = absl::Minutes(2);
// One activation or gradient transfer, including the wait for the peer to
// reach its matching operation.
inline constexpr absl::Duration kDefaultP2pTimeout = absl::Minutes(5);
// One allreduce or barrier.
inline constexpr absl::Duration kDefaultCollectiveTimeout = absl::Minutes(5);

// Transfers between two ranks travel in lanes: a transfer's lane is its tag
// modulo kP2pLanes. Gloo matches a receive with its send by tag whatever the
// order; NCCL has no tags and pairs them by issue order within each channel
// (sender, receiver, lane). So callers post the receives of one channel in
// the order its sends were posted. The schedule validator proves this for
// worker programs, whose tags put the transfer kind (activation or gradient)
// in the lane (message_tags.h).
inline constexpr int64_t kP2pLanes = 2;

inline int P2pLane(int64_t tag) { return static_cast<int>(tag % kP2pLanes); }

// A pair of ranks with transfers from `src` to `dst`. Implementations that
// connect pairs up front (NCCL) are given every link of the job, the same
// list on every rank, and carry transfers on those links alone.
struct P2pLink {
  int src = 0;
  int dst = 0;

  bool operator<(const P2pLink& other) const {
    return src != other.src ? src < other.src : dst < other.dst;
  }
};

// INVALID_ARGUMENT naming the link unless every link joins two distinct
// ranks in [0, world_size) and no link is listed twice.
absl::Status ValidateP2pLinks(const std::vector<P2pLink>& links,
                              int world_size);

// Ranks that allreduce together: one group per stage, holding every worker
// with a replica of it. Every rank is given the job's whole list of groups, in
// the same order, and joins those it is a member of.
struct CommGroup {
  // Unique within the job, e.g. "stage3"; AllReduceSum names it.
  std::string name;
  // Global ranks, ascending, no duplicates. A member's rank within the group
  // is its index here.
  std::vector<int> ranks;
};

// INVALID_ARGUMENT naming the group and the offending value unless every group
// has a unique non-empty name and ascending, distinct ranks in [0, world_size).
absl::Status ValidateCommGroups(const std::vector<CommGroup>& groups,
                                int world_size);

// Elements [begin, end) of a flat buffer.
struct ShardRange {
  int64_t begin = 0;
  int64_t end = 0;

  int64_t size() const { return end - begin; }
};

// The layout of the sharded collectives (AllGather, ReduceScatterSum): a flat
// buffer of `elements` is split evenly and in order over a group, member i of
// G owning [i·n/G, (i+1)·n/G). The shards are contiguous, cover every element
// once and differ in size by at most one.
inline ShardRange ShardOf(int64_t elements, int member, int members) {
  return {elements * member / members, elements * (member + 1) / members};
}

// One operation in flight. It keeps its tensor alive until it completes.
class PendingOp {
 public:
  virtual ~PendingOp() = default;

  // Blocks until the operation has completed (a sent tensor may be modified
  // again, a received or reduced tensor holds its result), or failed, or
  // `timeout` has passed. DEADLINE_EXCEEDED on timeout, UNAVAILABLE when a
  // peer is gone or the transport failed; the message names the operation,
  // the peer or group, and the timeout.
  virtual absl::Status Wait(absl::Duration timeout) = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // Starts sending `tensor` (contiguous; on the device the implementation
  // serves) to `peer` != rank(). The receiver posts a Recv with the same tag
  // and a tensor of the same size and dtype. Tags are >= 0; several transfers
  // may be in flight between the same peers, matched by tag (and by order
  // within a lane, see kP2pLanes). INVALID_ARGUMENT for a bad peer, tag or
  // tensor.
  virtual absl::StatusOr<std::unique_ptr<PendingOp>> Send(
      const at::Tensor& tensor, int peer, int64_t tag) = 0;

  // Starts receiving into `tensor` (contiguous, preallocated) from `peer`.
  virtual absl::StatusOr<std::unique_ptr<PendingOp>> Recv(
      const at::Tensor& tensor, int peer, int64_t tag) = 0;

  // Starts summing `tensor` in place over the members of the group named
  // `group`, which must contain this rank. Every member calls it with a tensor
  // of the same size and dtype, and all members issue their allreduces on one
  // group in the same order. NOT_FOUND when this rank is in no such group.
  virtual absl::StatusOr<std::unique_ptr<PendingOp>> AllReduceSum(
      const at::Tensor& tensor, absl::string_view group) = 0;

  // Starts gathering a buffer sharded over the group named `group` (ShardOf
  // over its flattened elements, by each member's index in the group): this
  // member's shard of `buffer` holds its values, and when done every
  // member's shard does. Called like AllReduceSum, in one order with it.
  virtual absl::StatusOr<std::unique_ptr<PendingOp>> AllGather(
      const at::Tensor& buffer, absl::string_view group) = 0;

  // Starts summing `buffer` over the group into this member's shard of it:
  // when done, that shard holds the group's sum of it, and the rest of
  // `buffer` is left in an unspecified state. Called like AllReduceSum.
  virtual absl::StatusOr<std::unique_ptr<PendingOp>> ReduceScatterSum(
      const at::Tensor& buffer, absl::string_view group) = 0;

  // Returns when every rank has reached the barrier, or an error after
  // `timeout`.
  virtual absl::Status Barrier(absl::Duration timeout) = 0;
};

namespace comm_internal {

// Argument checks shared by the implementations: INVALID_ARGUMENT naming
// `operation` ("send", "recv") and the bad value.
absl::Status CheckPeerAndTag(absl::string_view operation, int peer, int64_t tag,
                             int rank, int world_size);

// "send to rank 3 (tag 12)", "recv from rank 3 (tag 12)".
std::string DescribeP2p(absl::string_view operation, int peer, int64_t tag);

// NOT_FOUND: "rank 3 is not a member of a communication group named 'x'".
absl::Status NotAMember(int rank, absl::string_view group);

// The group named `name` in an implementation's map of the groups this rank
// belongs to; NOT_FOUND naming the rank and the group otherwise.
template <typename GroupMap>
absl::StatusOr<const typename GroupMap::mapped_type*> FindGroup(
    const GroupMap& groups, absl::string_view name, int rank) {
  const auto it = groups.find(name);
  if (it == groups.end()) {
    return NotAMember(rank, name);
  }
  return &it->second;
}

// This rank's shard of a buffer of `elements` sharded over the group named
// `group` of `groups`; NOT_FOUND as FindGroup.
absl::StatusOr<ShardRange> OwnShard(const std::vector<CommGroup>& groups,
                                    absl::string_view group, int rank,
                                    int64_t elements);

// AllGather for a transport without an all-gather of uneven shards: zeroes
// `buffer` outside `own` and sums it over the group. That is exact (x + 0 =
// x) at twice the bytes of a ring all-gather.
absl::StatusOr<std::unique_ptr<PendingOp>> AllGatherBySum(
    Communicator& comm, const at::Tensor& buffer, absl::string_view group,
    ShardRange own);

}  // namespace comm_internal
}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_COMM_COMMUNICATOR_H_
