// Proves a set of worker programs correct before anything runs them.
//
//   RETURN_IF_ERROR(ValidateSchedule(schedule));
//
// Checks, in order (the first failing group is reported, up to
// kMaxReportedProblems problems each):
//  1. Structure: ranks, held stage replicas (each stage of each chunk held by
//     exactly one rank per data-parallel replica), field ranges, p2p peers
//     equal to the rank that holds the neighbouring stage.
//  2. Coverage: every micro-batch of every data-parallel replica runs forward
//     and backward (all parts) exactly once on every stage of its route (one
//     chunk for replicated chunks, all chunks in order for chained ones), on
//     the rank that holds the stage; a backward is one BACKWARD or its two
//     halves, BACKWARD_INPUT and BACKWARD_WEIGHT, each exactly once (a
//     missing or doubled half is named). Each held model stage whose
//     replicas span more than one rank (a gradient group) sums its gradients
//     exactly once, by an allreduce or a reduce-scatter; a sharded stage
//     (one that reduce-scatters, steps a shard or gathers) steps its shard
//     (SHARD_STEP) and gathers the shards (ALLGATHER) exactly once; every
//     member of a group runs the same collectives; a stage of one rank has
//     nothing to shard over.
//  3. Matching: every send has exactly one receive with the same MessageKey,
//     and each channel (sender, receiver, activation or gradient) receives
//     its messages in the order they were sent: NCCL, which has no tags,
//     pairs sends and receives by issue order within a channel.
//  4. Joint execution (JointExecution): data dependencies hold at every
//     compute op and send, and all programs run to the end; a deadlock is
//     reported with its wait-for cycle. A BACKWARD_WEIGHT runs after the
//     BACKWARD_INPUT of its micro-batch (which is what keeps the stash and
//     the autograd graph until W: only BACKWARD and W free them), a stage's
//     gradient sum after its last weight gradient, its SHARD_STEP after the
//     sum has ended, its all-gather after its SHARD_STEP, and the optimizer
//     step after every held stage's sum. As every compute op of a stage
//     precedes its sum, none sees a stage whose shard is stepped and not yet
//     gathered. Only BACKWARD and BACKWARD_INPUT may recompute.
// An asynchronous schedule (UpdateRule other than synchronous) updates
// after the micro-batches its rule names, each exactly once per rank (1),
// and each update follows exactly the weight gradients of the micro-batches
// up to the one it names (4). A repeating one (Topology::repeating) is
// checked over three steps and the drain, unrolled (step_unrolling.h), and
// its errors name the unrolled micro-batches. Under kDoubleBuffered the
// weights a step's micro-batches run on always exist: the update of the
// step before the previous one sits in the previous step at the latest.
// Errors are InvalidArgument (1-3, data dependencies) or FailedPrecondition
// (deadlock).
#ifndef CHIMERA_SCHEDULE_VALIDATOR_H_
#define CHIMERA_SCHEDULE_VALIDATOR_H_

#include "absl/status/status.h"
#include "schedule/program.h"

namespace chimera::schedule {

inline constexpr int kMaxReportedProblems = 8;

absl::Status ValidateSchedule(const Schedule& schedule);

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_VALIDATOR_H_
