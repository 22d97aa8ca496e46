// Converts between the engine's Schedule and the public chimera.v1 programs
// the coordinator sends to workers.
//
//   std::vector<chimera::v1::WorkerProgram> programs = ToProto(schedule);
//   ASSIGN_OR_RETURN(Schedule back, FromProto(schedule.topology, programs));
#ifndef CHIMERA_SCHEDULE_PROGRAM_PROTO_H_
#define CHIMERA_SCHEDULE_PROGRAM_PROTO_H_

#include <vector>

#include "absl/status/statusor.h"
#include "chimera/v1/program.pb.h"
#include "schedule/program.h"

namespace chimera::schedule {

// StageReplica layer ranges are left 0: the planner's partition fills them.
std::vector<chimera::v1::WorkerProgram> ToProto(const Schedule& schedule);

// InvalidArgument for OP_UNSPECIFIED or an unknown op, or a program whose
// rank is outside the topology.
absl::StatusOr<Schedule> FromProto(
    const Topology& topology,
    const std::vector<chimera::v1::WorkerProgram>& programs);

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_PROGRAM_PROTO_H_
