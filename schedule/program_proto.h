// Converts between the engine's Schedule and the public chimera.v1 programs
// the coordinator sends to workers, each with the schedule's outline.
//
//   std::vector<chimera::v1::WorkerProgram> programs = ToProto(schedule);
//   ASSIGN_OR_RETURN(Schedule back, FromProto(schedule.topology, programs));
//   chimera::v1::ScheduleOutline outline = ToProto(OutlineOf(schedule));
//   ASSIGN_OR_RETURN(RankSchedule mine,
//                    RankScheduleFromProto(outline, programs[rank]));
#ifndef CHIMERA_SCHEDULE_PROGRAM_PROTO_H_
#define CHIMERA_SCHEDULE_PROGRAM_PROTO_H_

#include <vector>

#include "absl/status/statusor.h"
#include "chimera/v1/program.pb.h"
#include "chimera/v1/service.pb.h"
#include "schedule/program.h"
#include "schedule/rank_schedule.h"

namespace chimera::schedule {

// Instruction `index` of rank `rank`'s program; INVALID_ARGUMENT naming
// both when its op is not an operation.
absl::StatusOr<Instruction> InstructionFromProto(
    const chimera::v1::Instruction& in, int rank, size_t index);

// StageReplica layer ranges are left 0: the planner's partition fills them.
std::vector<chimera::v1::WorkerProgram> ToProto(const Schedule& schedule);

// InvalidArgument for OP_UNSPECIFIED or an unknown op, or a program whose
// rank is outside the topology.
absl::StatusOr<Schedule> FromProto(
    const Topology& topology,
    const std::vector<chimera::v1::WorkerProgram>& programs);

chimera::v1::ScheduleOutline ToProto(const ScheduleOutline& outline);

// A rank's share as a worker receives it. INVALID_ARGUMENT naming what does
// not fit: a topology that is not one, an outline without a rank's stages or
// a digest, a program whose rank or stages are outside the topology, or an
// instruction that is not an operation.
absl::StatusOr<RankSchedule> RankScheduleFromProto(
    const chimera::v1::ScheduleOutline& outline,
    const chimera::v1::WorkerProgram& program);

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_PROGRAM_PROTO_H_
