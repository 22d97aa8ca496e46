// DAPPLE's non-uniform stage replication (DAPPLE paper, section 5.2): a
// stage may run on several workers of one pipeline, each on its slice of
// every micro-batch, and the next stage takes each slice from the worker
// that computed it (split-concat; Topology::replication has the layout).
//
//   ASSIGN_OR_RETURN(Schedule one_each, GenerateOneFOneB(params));
//   ASSIGN_OR_RETURN(Schedule two_one, ReplicateStages(one_each, {2, 1}));
//
// Every replica runs its stage's program on its own slices: an op on
// micro-batch m becomes one op per slice of m the replica owns, in slice
// order, and a transfer names the replica of the neighbouring stage that
// owns its slice. A stage's ops on one micro-batch thus run back to back, so
// the replicas of a stage work on the same micro-batch at once (no tail of
// round-robin micro-batches), and a stage with fewer replicas computes the
// slices it gathers one after another, which gives what computing their
// concatenation would. Whole-stage ops (the gradient collectives) are
// copied, and the gradient group of a stage grows to all its replicas.
#ifndef CHIMERA_SCHEDULE_STAGE_REPLICATION_H_
#define CHIMERA_SCHEDULE_STAGE_REPLICATION_H_

#include <vector>

#include "absl/status/statusor.h"
#include "schedule/program.h"

namespace chimera::schedule {

// `uniform` with position p run by replication[p] workers in each of its
// data-parallel replicas. InvalidArgument unless `uniform` is a synchronous
// one-chunk pipeline whose rank at position p holds stage p alone, and
// `replication` gives each position at least one worker.
absl::StatusOr<Schedule> ReplicateStages(const Schedule& uniform,
                                         const std::vector<int>& replication);

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_STAGE_REPLICATION_H_
