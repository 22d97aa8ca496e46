// Sharding full (the breadth-first paper's DP_FS): between uses a worker
// keeps only its shard of a stage's parameters, gathers them whole
// (ALLGATHER_BEGIN / END) before it computes with them and frees the copy
// again (RELEASE_PARAMS). A stage is fully sharded in a program when the
// program releases it; for each such stage the program, alone, must:
//
//   - compute with the stage only while it is gathered: after an
//     ALLGATHER_END with no RELEASE_PARAMS since;
//   - begin a gather only while released, and release only once gathered;
//   - step its shard (SHARD_STEP) while released, so that no gathered copy
//     outlives the update;
//   - run every gather before its gradients' sum begins (the members of a
//     group issue its collectives in one order);
//   - end released: the next step starts from the shards.
//
//   for (const std::string& problem : ParameterResidencyProblems(
//            topology, program.instructions))
//     ... "#12 FORWARD chunk=0 stage=1 mb=3 computes with ..."
#ifndef CHIMERA_SCHEDULE_PARAMETER_RESIDENCY_H_
#define CHIMERA_SCHEDULE_PARAMETER_RESIDENCY_H_

#include <set>
#include <string>
#include <vector>

#include "schedule/program.h"

namespace chimera::schedule {

// The model stages `program` releases (RELEASE_PARAMS): its fully sharded
// ones.
std::set<int> FullyShardedStages(const Topology& topology,
                                 const std::vector<Instruction>& program);

// Where `program` breaks the rules above, each naming the instruction ("#12
// FORWARD ...") or, for the end, the stage; empty when it keeps them.
std::vector<std::string> ParameterResidencyProblems(
    const Topology& topology, const std::vector<Instruction>& program);

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_PARAMETER_RESIDENCY_H_
