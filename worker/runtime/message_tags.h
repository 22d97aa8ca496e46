// Tags of point-to-point transfers: each activation or gradient of a
// schedule gets its own tag, so any number may be in flight between two
// workers and Gloo matches each receive with its send whatever the order.
//
// A transfer is named by the activation edge it crosses, identified by the
// stage replica that produces the activation (the sender of an activation,
// the receiver of its gradient), the micro-batch (local to its data-parallel
// replica; the two ends are in the same replica) and the backward part.
//
// The tag's lane (communicator.h) is the transfer's kind, so activations and
// gradients are separate channels: the order in which a program receives
// each kind from a peer is the order in which the peer sent it.
//
//   MessageTags tags(rank_schedule.outline);
//   int64_t tag = tags.Of(TransferKind::kActivation, producer, mb, /*part=*/0);
//   std::vector<P2pLink> links = P2pLinks(rank_schedule.program);  // NCCL
#ifndef CHIMERA_WORKER_RUNTIME_MESSAGE_TAGS_H_
#define CHIMERA_WORKER_RUNTIME_MESSAGE_TAGS_H_

#include <cstdint>
#include <vector>

#include "schedule/program.h"
#include "schedule/rank_schedule.h"
#include "worker/comm/communicator.h"

namespace chimera::worker {

enum class TransferKind { kActivation = 0, kGradient = 1 };

class MessageTags {
 public:
  // Sizes the tag space from the schedule's topology and the largest
  // num_parts of any of its instructions; every rank of a job builds it from
  // the same outline and so agrees on every tag.
  explicit MessageTags(const schedule::ScheduleOutline& outline);

  // Unique over kind, producer (chunk, stage), micro-batch >= 0 and part in
  // [0, max parts); >= 0.
  int64_t Of(TransferKind kind, schedule::StageRef producer, int micro_batch,
             int part) const;

  // The most parts a backward may be split into (the outline's).
  int max_parts() const { return static_cast<int>(max_parts_); }

 private:
  int64_t num_chunks_;
  int64_t depth_;
  int64_t max_parts_;
};

// The (sender, receiver) pairs `program`'s rank is on, sorted: its sends and
// its receives. The two ranks of a link both list it, since a send's peer
// receives it.
std::vector<P2pLink> P2pLinks(const schedule::WorkerProgram& program);

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_MESSAGE_TAGS_H_
