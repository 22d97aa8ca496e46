// Runs a set of worker programs together under the runtime's blocking rules,
// in some order a real run could take: SEND_* and a collective's BEGIN
// (ALLREDUCE, REDUCE_SCATTER, ALLGATHER) never block; RECV_* blocks until the
// matching send has been posted; a collective's END blocks until every
// worker holding that model stage has begun that collective. A stage may run
// one collective several times (sharding full gathers its parameters before
// each use): each member's k-th BEGIN of it pairs with the others' k-th. The
// validator and the simulator both drive their bookkeeping from it.
//
//   JointExecution run(schedule);
//   RETURN_IF_ERROR(run.Run([&](const ExecutionStep& step) {
//     ... step.rank, step.index, step.matched_send ...
//     return absl::OkStatus();
//   }));
//
// When no worker can move and some have not finished, Run returns
// FailedPrecondition naming the wait-for cycle ("rank 0 waits at #4
// RECV_GRAD ... for rank 1; rank 1 waits at #2 RECV_ACT ... for rank 0").
#ifndef CHIMERA_SCHEDULE_JOINT_EXECUTION_H_
#define CHIMERA_SCHEDULE_JOINT_EXECUTION_H_

#include <cstddef>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "schedule/program.h"

namespace chimera::schedule {

// The tag that pairs a send with its receive: which activation or gradient
// (named by the upstream stage of the pipeline edge it crosses), which
// micro-batches and slice, and which two ranks.
struct MessageKey {
  bool gradient = false;
  StageRef boundary;
  MicroBatches micro_batches;
  int part = 0;
  int num_parts = 1;
  int src = 0;
  int dst = 0;

  bool operator==(const MessageKey& o) const {
    return gradient == o.gradient && boundary == o.boundary &&
           micro_batches == o.micro_batches && part == o.part &&
           num_parts == o.num_parts && src == o.src && dst == o.dst;
  }
  template <typename H>
  friend H AbslHashValue(H h, const MessageKey& k) {
    return H::combine(std::move(h), k.gradient, k.boundary.chunk,
                      k.boundary.stage, k.micro_batches, k.part, k.num_parts,
                      k.src, k.dst);
  }
};

// Key of a SEND_*/RECV_* instruction on `rank`; nullopt when the op is not
// p2p or crosses no pipeline edge (e.g. RECV_ACT on a model's first stage).
std::optional<MessageKey> MessageKeyOf(const Topology& topology, int rank,
                                       const Instruction& inst);

// "activation of chunk 0 stage 1 mb 2 from rank 1 to rank 2".
std::string DescribeMessage(const MessageKey& key);

struct InstructionId {
  int rank = 0;
  size_t index = 0;
};

struct ExecutionStep {
  int rank = 0;
  size_t index = 0;
  const Instruction* inst = nullptr;
  // RECV_*: the send it consumes.
  std::optional<InstructionId> matched_send;
  // A collective's END, and the BEGIN that completes its group: the BEGIN of
  // that collective by every member of the group.
  const std::vector<InstructionId>* group_begins = nullptr;
  // A collective's BEGIN or END: how many of the same collective on the same
  // model stage this rank began before it (0 for the first).
  int occurrence = 0;
};

class JointExecution {
 public:
  // `schedule` must outlive this object.
  explicit JointExecution(const Schedule& schedule);
  JointExecution(const JointExecution&) = delete;
  JointExecution& operator=(const JointExecution&) = delete;

  // Calls `on_step` once per instruction; stops at the first error it
  // returns. Deadlock: FailedPrecondition naming the cycle.
  absl::Status Run(const std::function<absl::Status(const ExecutionStep&)>&
                       on_step);

  // Ranks holding a replica of each model stage (the gradient groups).
  const std::vector<std::vector<int>>& holders() const { return holders_; }

 private:
  const Schedule& schedule_;
  std::vector<std::vector<int>> holders_;
};

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_JOINT_EXECUTION_H_
