// One rank's share of a schedule: its own program in full and, of the other
// ranks' programs, only what every rank must agree on. The coordinator
// validates the whole schedule and sends each worker its share
// (program_proto.h); a worker never regenerates the schedule.
//
//   RankSchedule mine = RankScheduleOf(schedule, rank);  // or from a StartTask
//   ASSIGN_OR_RETURN(auto executor, ProgramExecutor::Create(mine, ...));
//
// Why the whole schedule is not sent: at D = 64, W = 8 it is 512 programs
// of a few hundred instructions each, megabytes to every worker, while a
// rank needs only which stages the others hold (its gradient groups, which
// checkpoint files it writes) and how many parts a backward may be split
// into (the tags of its transfers).
#ifndef CHIMERA_SCHEDULE_RANK_SCHEDULE_H_
#define CHIMERA_SCHEDULE_RANK_SCHEDULE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "schedule/program.h"

namespace chimera::schedule {

// What every rank knows of the whole schedule; the same for all ranks.
struct ScheduleOutline {
  Topology topology;
  // The stage replicas every rank holds, indexed by rank; its size is the
  // world size.
  std::vector<std::vector<StageRef>> stages_by_rank;
  // The largest num_parts of any instruction of any rank (at least 1).
  int max_parts = 1;
  // ScheduleDigest of the whole schedule: ranks that meet compare it, so a
  // rank sent another schedule than its peers fails before any step.
  std::string digest;

  int world_size() const { return static_cast<int>(stages_by_rank.size()); }
};

struct RankSchedule {
  ScheduleOutline outline;
  // This rank's program (program.rank is the rank).
  WorkerProgram program;

  int rank() const { return program.rank; }
  const Topology& topology() const { return outline.topology; }
};

ScheduleOutline OutlineOf(const Schedule& schedule);

// `rank` must be one of the schedule's.
RankSchedule RankScheduleOf(const Schedule& schedule, int rank);

// A stable digest (16 hex digits) of every rank's stages and instructions
// and the topology: equal on every machine and build for equal schedules.
std::string ScheduleDigest(const Schedule& schedule);

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_RANK_SCHEDULE_H_
