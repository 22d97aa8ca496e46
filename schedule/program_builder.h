// Turns a compute order (forwards and backwards per pipeline position, as a
// generator placed them on a unit-time grid) into complete worker programs:
// p2p sends and receives, the gradient groups' collectives and the optimizer
// steps, for every data-parallel replica.
//
//   Placement placement = ...;            // (chunk, stage) -> position
//   std::vector<std::vector<ComputeOp>> order = ...;  // per position
//   ASSIGN_OR_RETURN(Schedule s, BuildPrograms(topology, placement, order,
//                                              {Sync::kEager}));
//
// Deadlock freedom by construction: a RECV sits right before the compute op
// that consumes it and a SEND right after the op that produces it, so if the
// compute order respects data dependencies in grid time (every generator's
// contract) a runtime whose sends are asynchronous and receives block can
// always make progress. The collectives come in two rounds, each begun on
// every stage before any of it is waited on, so they cannot wait on each
// other either: the gradients' sums (allreduce or reduce-scatter), and after
// them a sharded stage's all-gather.
//
// A sharded stage (gradient group of two or more, sharding other than none)
// ends its sum, steps its shard (SHARD_STEP) and begins its all-gather at
// once, so its gather runs while the worker steps its other stages; the
// gathers end after OPTIMIZER_STEP, which steps the unsharded stages.
//
// One exception to the rounds: a reduce-scattered stage whose group is the
// same position of every data-parallel replica ends its sum mid-program,
// right before the position's next weight gradient where that starts
// another stage (so a breadth-first worker holds one stage's whole gradient
// bucket at a time). Its wait cannot deadlock: the members' programs are the
// same up to the replica, each replica's p2p stays within it, and so the
// run in which every replica takes the same steps as one replica would
// alone (which completes, as above) reaches every member's begin before any
// member's end. Groups spanning positions (Chimera's directions) keep the
// rounds.
//
// Sharding full gathers a stage's parameters before its uses and releases
// them after (PlanGatherWindows in the .cc): mid-program for mirrored
// groups, safe by the same argument; at the start of the program for groups
// spanning positions, where no gather's end can wait for a member's
// progress.
#ifndef CHIMERA_SCHEDULE_PROGRAM_BUILDER_H_
#define CHIMERA_SCHEDULE_PROGRAM_BUILDER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "schedule/program.h"
#include "schedule/schedule_params.h"

namespace chimera::schedule {

// One forward or backward as a generator places it.
struct ComputeOp {
  OpKind op = OpKind::kForward;
  StageRef ref;
  MicroBatches micro_batches;
  int part = 0;
  int num_parts = 1;
  bool recompute = false;
  // Half-open slot interval on the generator's unit-time grid. Only the
  // order and the idle gaps matter: the eager-sync rule reads the gaps.
  int64_t grid_start = 0;
  int64_t grid_end = 1;
};

// Pipeline position (0..depth-1, within one data-parallel replica) of every
// stage replica: position[chunk][stage].
struct Placement {
  std::vector<std::vector<int>> position;
  int At(StageRef ref) const { return position[ref.chunk][ref.stage]; }
};

// When each stage's gradients are summed, and what its group shards.
struct GradientSync {
  Sync sync = Sync::kEager;
  Sharding sharding = Sharding::kNone;
  // The workers each position's stage will run on once ReplicateStages
  // replicates the programs (empty: one each): a stage replicated within a
  // data-parallel replica sums its gradients over its replicas too.
  std::vector<int> replication;
};

// `order[p]` is the compute order of position p, sorted by grid_start. The
// same order is replicated for every data-parallel rank; each rank's
// micro-batch indices are local to its replica.
absl::StatusOr<Schedule> BuildPrograms(
    const Topology& topology, const Placement& placement,
    const std::vector<std::vector<ComputeOp>>& order, GradientSync sync);

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_PROGRAM_BUILDER_H_
